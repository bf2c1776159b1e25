package abi

import (
	"errors"
	"strconv"
)

// VarKind is the kind of a version 2 state variable, as declared in the init result (see
// [AppendInitResultV2]).
type VarKind uint32

const (
	// VarValue is a value variable: one opaque value, or none.
	VarValue VarKind = 1
	// VarList is a list variable: an ordered list of opaque elements.
	VarList VarKind = 2
	// VarMap is a map variable: opaque values under byte-string keys, ordered bytewise.
	VarMap VarKind = 3
)

// Valid reports whether k is one of [VarValue], [VarList], [VarMap].
func (k VarKind) Valid() bool { return k >= VarValue && k <= VarMap }

// String returns "value", "list" or "map", or "unknown" for any other value.
func (k VarKind) String() string {
	switch k {
	case VarValue:
		return "value"
	case VarList:
		return "list"
	case VarMap:
		return "map"
	}
	return "unknown"
}

// VarDecl declares one state variable in a version 2 init result. A variable's index in ops
// is its position in the declarations.
type VarDecl struct {
	// Name is 1 to [MaxVarNameLen] bytes of [a-z0-9_], starting with a letter, unique among
	// the declarations. The host maps variables to their stored state by name.
	Name string
	// Kind is [VarValue], [VarList] or [VarMap].
	Kind VarKind
	// TTLMs is the variable's time to live in milliseconds, 0 for none; never negative.
	TTLMs int64
}

// varDeclSize is the size of the smallest declaration: name length (an empty name is invalid,
// but reported as such), kind, ttl.
const varDeclSize = 4 + 4 + 8

// varNameProblem says what is wrong with a variable name, or "" when it is valid.
func varNameProblem(name string) string {
	if name == "" {
		return "is empty"
	}
	if len(name) > MaxVarNameLen {
		return "is longer than " + strconv.Itoa(MaxVarNameLen) + " bytes"
	}
	if c := name[0]; c < 'a' || c > 'z' {
		return "does not start with a letter a-z"
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return "has a byte other than a-z, 0-9 and _ at offset " + strconv.Itoa(i)
		}
	}
	return ""
}

// quoteName quotes a (possibly hostile) name for an error message, cut to a readable length.
func quoteName(name string) string {
	if len(name) > MaxVarNameLen+16 {
		return strconv.Quote(name[:MaxVarNameLen+16]) + "..."
	}
	return strconv.Quote(name)
}

// ValidateVarName returns nil when name is a valid state variable name: 1 to [MaxVarNameLen]
// bytes of [a-z0-9_], starting with a letter. Otherwise the error says what is wrong.
func ValidateVarName(name string) error {
	if p := varNameProblem(name); p != "" {
		return errors.New("abi: state variable name " + quoteName(name) + " " + p)
	}
	return nil
}

// declProblem says what is wrong with the declarations, or "" when they are valid.
func declProblem(decls []VarDecl) string {
	if len(decls) > MaxVars {
		return strconv.Itoa(len(decls)) + " state variables declared, at most " + strconv.Itoa(MaxVars) + " are allowed"
	}
	var seen map[string]int
	if len(decls) > 1 {
		seen = make(map[string]int, len(decls))
	}
	for i, d := range decls {
		at := "state variable " + strconv.Itoa(i)
		if p := varNameProblem(d.Name); p != "" {
			return at + ": name " + quoteName(d.Name) + " " + p
		}
		at += " (" + d.Name + ")"
		if !d.Kind.Valid() {
			return at + ": unknown kind " + strconv.FormatUint(uint64(d.Kind), 10) + " (want 1 value, 2 list or 3 map)"
		}
		if d.TTLMs < 0 {
			return at + ": negative ttl " + strconv.FormatInt(d.TTLMs, 10) + " ms (want 0 for none, or > 0)"
		}
		if seen != nil {
			if j, dup := seen[d.Name]; dup {
				return at + ": name already declared by state variable " + strconv.Itoa(j)
			}
			seen[d.Name] = i
		}
	}
	return ""
}

// ValidateVarDecls returns nil when decls is a valid list of declarations: at most [MaxVars],
// each with a valid name (see [ValidateVarName]), a valid kind and a ttl of 0 or more, no name
// twice. Otherwise the error names the first offending declaration and what is wrong with it.
// A guest SHOULD call it before [AppendInitResultV2], which does not validate.
func ValidateVarDecls(decls []VarDecl) error {
	if p := declProblem(decls); p != "" {
		return errors.New("abi: " + p)
	}
	return nil
}

// AppendInitResultV2 appends a version 2 init result to b: the version 1 init result (status
// u32, message as u32 length + bytes; see [AppendInitResult]) followed, when status is
// [StatusOK], by var_count u32 and per declaration its name (u32 length + bytes), kind u32 and
// ttl_ms i64. decls is ignored for any other status. It does not validate decls (see
// [ValidateVarDecls]).
func AppendInitResultV2(b []byte, status Status, msg string, decls []VarDecl) []byte {
	b = AppendInitResult(b, status, msg)
	if status != StatusOK {
		return b
	}
	b = appendU32(b, uint32(len(decls)))
	for _, d := range decls {
		b = appendU32(b, uint32(len(d.Name)))
		b = append(b, d.Name...)
		b = appendU32(b, uint32(d.Kind))
		b = appendI64(b, d.TTLMs)
	}
	return b
}

// ParseInitResultV2 decodes a version 2 init result. With a status other than [StatusOK] it
// returns the status and the message and no declarations; with [StatusOK] the declarations,
// validated as [ValidateVarDecls] does. The message aliases b; the declarations are newly
// allocated and do not alias b. Errors wrap [ErrMalformed] and say what is wrong.
func ParseInitResultV2(b []byte) (Status, []byte, []VarDecl, error) {
	r := reader{b: b}
	st, msg := Status(r.u32()), r.bytes()
	if r.err != nil {
		return 0, nil, nil, malformedErr("init result shorter than its status and message")
	}
	if st != StatusOK {
		if r.finish() != nil {
			return 0, nil, nil, malformedErr("trailing bytes after the message of a failed init result")
		}
		return st, msg, nil, nil
	}
	n := r.u32()
	if r.err != nil {
		return 0, nil, nil, malformedErr("init result v2 without var_count")
	}
	if n > MaxVars {
		return 0, nil, nil, malformedErr(strconv.FormatUint(uint64(n), 10) + " state variables declared, at most " + strconv.Itoa(MaxVars) + " are allowed")
	}
	if int(n) > (len(b)-r.off)/varDeclSize {
		return 0, nil, nil, malformedErr("var_count " + strconv.FormatUint(uint64(n), 10) + " does not fit in the init result")
	}
	decls := make([]VarDecl, n)
	for i := range decls {
		name := r.bytes()
		if len(name) > MaxVarNameLen {
			// Refuse before copying a hostile length into a string.
			return 0, nil, nil, malformedErr("state variable " + strconv.Itoa(i) + ": name " + quoteName(string(name[:MaxVarNameLen])) + "... is longer than " + strconv.Itoa(MaxVarNameLen) + " bytes")
		}
		decls[i] = VarDecl{Name: string(name), Kind: VarKind(r.u32()), TTLMs: r.i64()}
		if r.err != nil {
			return 0, nil, nil, malformedErr("state variable " + strconv.Itoa(i) + ": declaration truncated")
		}
	}
	if r.finish() != nil {
		return 0, nil, nil, malformedErr("trailing bytes after the declarations")
	}
	if p := declProblem(decls); p != "" {
		return 0, nil, nil, malformedErr(p)
	}
	return st, msg, decls, nil
}
