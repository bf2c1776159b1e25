package abi

import (
	"errors"
	"strconv"
)

// Limits of several inputs ([InitHasInputs], abi/README.md section 9.3a).
const (
	// MaxInputs is the largest number of inputs a deployment may have, so the largest
	// input_count of an init buffer.
	MaxInputs = 16
	// MaxInputNameLen is the longest input name, in bytes.
	MaxInputNameLen = 32
)

// inputNameProblem says what is wrong with an input name, or "" when it is valid.
func inputNameProblem(name []byte) string {
	if len(name) == 0 {
		return "is empty"
	}
	if len(name) > MaxInputNameLen {
		return "is longer than " + strconv.Itoa(MaxInputNameLen) + " bytes"
	}
	if c := name[0]; c < 'a' || c > 'z' {
		return "does not start with a letter a-z"
	}
	for i, c := range name {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return "has a byte other than a-z, 0-9, _ and - at offset " + strconv.Itoa(i)
		}
	}
	return ""
}

// ValidateInputName returns nil when name is a valid input name: 1 to [MaxInputNameLen] bytes
// of [a-z0-9_-], starting with a letter. Otherwise the error says what is wrong.
func ValidateInputName(name string) error {
	if p := inputNameProblem([]byte(name)); p != "" {
		return errors.New("abi: input name " + quoteName(name) + " " + p)
	}
	return nil
}

// inputsProblem says what is wrong with a list of input names, or "" when it is valid: 1 to
// [MaxInputs] valid names, none twice.
func inputsProblem(names [][]byte) string {
	if len(names) == 0 || len(names) > MaxInputs {
		return "input_count " + strconv.Itoa(len(names)) + " (want 1 to " + strconv.Itoa(MaxInputs) + ")"
	}
	for i, n := range names {
		if p := inputNameProblem(n); p != "" {
			return "input " + strconv.Itoa(i) + ": name " + quoteName(string(n)) + " " + p
		}
		for j := range i {
			if string(names[j]) == string(n) {
				return "input " + strconv.Itoa(i) + ": name " + quoteName(string(n)) + " already used by input " + strconv.Itoa(j)
			}
		}
	}
	return ""
}

// appendInputs appends the input names of an init buffer with [InitHasInputs]: input_count
// u32, then each name (u32 length + bytes).
func appendInputs(b []byte, names [][]byte) []byte {
	b = appendU32(b, uint32(len(names)))
	for _, n := range names {
		b = appendBytes(b, n)
	}
	return b
}

// parseInputs reads the input names of an init buffer with [InitHasInputs] and checks them
// (see inputsProblem). The names alias r's buffer.
func parseInputs(r *reader) ([][]byte, error) {
	n := r.u32()
	if r.err != nil {
		return nil, malformedErr("init buffer: HAS_INPUTS without input_count")
	}
	if n == 0 || n > MaxInputs {
		return nil, malformedErr("init buffer: input_count " + strconv.FormatUint(uint64(n), 10) + " (want 1 to " + strconv.Itoa(MaxInputs) + ")")
	}
	names := make([][]byte, n)
	for i := range names {
		names[i] = r.bytes()
		if r.err != nil {
			return nil, malformedErr("init buffer: input " + strconv.Itoa(i) + ": name truncated")
		}
	}
	if p := inputsProblem(names); p != "" {
		return nil, malformedErr("init buffer: " + p)
	}
	return names, nil
}

// DataGroupInputsSize returns the number of bytes [AppendDataGroupInputs] appends for this key
// and rows.
func DataGroupInputsSize(key []byte, rows [][]byte) int {
	return DataGroupSize(key, rows) + 4*len(rows)
}

// AppendDataGroupInputs appends a [GroupData] group of a version 2 process buffer whose init
// had [InitHasInputs] to b: kind u32 (0), key (u32 length + bytes), row_count u32, then each
// row as its input u32 (inputs[i], the index of the row's input in [Init.Inputs]) followed by
// the row (u32 length + bytes). A missing inputs[i] (inputs shorter than rows, or nil) is
// written as 0. A host MUST pass at least one row and indexes below the init's input count;
// the encoder does not check.
func AppendDataGroupInputs(b, key []byte, rows [][]byte, inputs []uint32) []byte {
	b = appendU32(b, uint32(GroupData))
	b = appendBytes(b, key)
	b = appendU32(b, uint32(len(rows)))
	for i, r := range rows {
		var in uint32
		if i < len(inputs) {
			in = inputs[i]
		}
		b = appendU32(b, in)
		b = appendBytes(b, r)
	}
	return b
}
