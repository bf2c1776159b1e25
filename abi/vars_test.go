package abi_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/abi"
)

func TestVarKindString(t *testing.T) {
	for k, want := range map[abi.VarKind]string{abi.VarValue: "value", abi.VarList: "list", abi.VarMap: "map", 0: "unknown", 4: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("VarKind(%d).String() = %q, want %q", uint32(k), got, want)
		}
		if got, want := k.Valid(), want != "unknown"; got != want {
			t.Errorf("VarKind(%d).Valid() = %v", uint32(k), got)
		}
	}
}

func TestValidateVarName(t *testing.T) {
	for _, ok := range []string{"a", "count", "a_1", "z9", strings.Repeat("x", abi.MaxVarNameLen)} {
		if err := abi.ValidateVarName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for name, want := range map[string]string{
		"":                                       "is empty",
		strings.Repeat("x", abi.MaxVarNameLen+1): "longer than 64 bytes",
		"1a":                                     "does not start with a letter",
		"_a":                                     "does not start with a letter",
		"Ab":                                     "does not start with a letter",
		"aB":                                     "at offset 1",
		"a-b":                                    "at offset 1",
		"a b":                                    "at offset 1",
		"é":                                      "does not start with a letter",
		"aé":                                     "at offset 1",
	} {
		err := abi.ValidateVarName(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want it to say %q", name, err, want)
		}
	}
}

func TestInitResultV2RoundTrip(t *testing.T) {
	decls := []abi.VarDecl{{Name: "count", Kind: abi.VarValue}, {Name: "events", Kind: abi.VarList, TTLMs: 60000}, {Name: "seen", Kind: abi.VarMap, TTLMs: 1}}
	b := abi.AppendInitResultV2(nil, abi.StatusOK, "", decls)
	st, msg, got, err := abi.ParseInitResultV2(b)
	if err != nil || st != abi.StatusOK || len(msg) != 0 || !slices.Equal(got, decls) {
		t.Fatalf("%v %q %+v %v", st, msg, got, err)
	}
	// The declarations do not alias the buffer.
	clear(b)
	if got[1].Name != "events" {
		t.Fatalf("names alias the buffer: %+v", got)
	}
	b = abi.AppendInitResultV2(nil, abi.StatusOK, "", decls)
	for i := range b {
		if _, _, _, err := abi.ParseInitResultV2(b[:i]); !errors.Is(err, abi.ErrMalformed) {
			t.Fatalf("truncated at %d: err = %v", i, err)
		}
	}
	if _, _, _, err := abi.ParseInitResultV2(append(b, 0)); !errors.Is(err, abi.ErrMalformed) {
		t.Fatalf("trailing byte: err = %v", err)
	}

	// No declarations.
	b = abi.AppendInitResultV2(nil, abi.StatusOK, "", nil)
	if st, _, got, err := abi.ParseInitResultV2(b); err != nil || st != abi.StatusOK || len(got) != 0 {
		t.Fatalf("empty: %v %+v %v", st, got, err)
	}

	// A failed init carries no declarations, whatever decls says.
	b = abi.AppendInitResultV2(nil, abi.StatusError, "bad gap", decls)
	if !bytes.Equal(b, abi.AppendInitResult(nil, abi.StatusError, "bad gap")) {
		t.Fatalf("failed init result is not v1's: % x", b)
	}
	st, msg, got, err = abi.ParseInitResultV2(b)
	if err != nil || st != abi.StatusError || string(msg) != "bad gap" || got != nil {
		t.Fatalf("failure: %v %q %+v %v", st, msg, got, err)
	}
	if _, _, _, err := abi.ParseInitResultV2(append(b, 0, 0, 0, 0)); !errors.Is(err, abi.ErrMalformed) {
		t.Fatalf("failure with declarations: err = %v", err)
	}
}

// TestInitResultV2Layout pins the byte layout of abi/README.md section 9.2.
func TestInitResultV2Layout(t *testing.T) {
	b := abi.AppendInitResultV2(nil, abi.StatusOK, "", []abi.VarDecl{{Name: "n", Kind: abi.VarList, TTLMs: 1000}})
	want := []byte{
		0, 0, 0, 0, 0, 0, 0, 0, // status 0, message ""
		1, 0, 0, 0, // var_count 1
		1, 0, 0, 0, 'n', // name
		2, 0, 0, 0, // kind list
		0xe8, 3, 0, 0, 0, 0, 0, 0, // ttl_ms 1000
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("got % x\nwant % x", b, want)
	}
}

func TestInitResultV2Invalid(t *testing.T) {
	many := make([]abi.VarDecl, abi.MaxVars+1)
	for i := range many {
		many[i] = abi.VarDecl{Name: "v" + strings.Repeat("x", i%50) + string(rune('a'+i%26)) + string(rune('a'+i/26)), Kind: abi.VarValue}
	}
	if err := abi.ValidateVarDecls(many[:abi.MaxVars]); err != nil {
		t.Fatalf("%d variables: %v", abi.MaxVars, err)
	}
	for _, tc := range []struct {
		name  string
		decls []abi.VarDecl
		want  string
	}{
		{"too many", many, "257 state variables declared, at most 256"},
		{"empty name", []abi.VarDecl{{Name: "", Kind: abi.VarValue}}, `state variable 0: name "" is empty`},
		{"bad name", []abi.VarDecl{{Name: "a", Kind: abi.VarValue}, {Name: "B", Kind: abi.VarValue}}, `state variable 1: name "B" does not start with a letter`},
		{"long name", []abi.VarDecl{{Name: strings.Repeat("a", 65), Kind: abi.VarValue}}, "is longer than 64 bytes"},
		{"kind 0", []abi.VarDecl{{Name: "a", Kind: 0}}, "state variable 0 (a): unknown kind 0"},
		{"kind 4", []abi.VarDecl{{Name: "a", Kind: 4}}, "unknown kind 4"},
		{"negative ttl", []abi.VarDecl{{Name: "a", Kind: abi.VarMap, TTLMs: -1}}, "negative ttl -1 ms"},
		{"duplicate", []abi.VarDecl{{Name: "a", Kind: abi.VarMap}, {Name: "b", Kind: abi.VarMap}, {Name: "a", Kind: abi.VarList}}, "state variable 2 (a): name already declared by state variable 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := abi.ValidateVarDecls(tc.decls); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ValidateVarDecls: err = %v, want %q", err, tc.want)
			}
			_, _, _, err := abi.ParseInitResultV2(abi.AppendInitResultV2(nil, abi.StatusOK, "", tc.decls))
			if !errors.Is(err, abi.ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseInitResultV2: err = %v, want %q", err, tc.want)
			}
		})
	}
	// A var_count that cannot fit is refused before anything is allocated for it.
	b := abi.AppendInitResult(nil, abi.StatusOK, "")
	b = append(b, 200, 0, 0, 0)
	if _, _, _, err := abi.ParseInitResultV2(b); !errors.Is(err, abi.ErrMalformed) || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("var_count 200 in no bytes: err = %v", err)
	}
	b = append(abi.AppendInitResult(nil, abi.StatusOK, ""), 0xff, 0xff, 0xff, 0xff)
	if _, _, _, err := abi.ParseInitResultV2(b); !errors.Is(err, abi.ErrMalformed) || !strings.Contains(err.Error(), "4294967295 state variables") {
		t.Fatalf("var_count 2^32-1: err = %v", err)
	}
}

func ExampleAppendInitResultV2() {
	decls := []abi.VarDecl{
		{Name: "count", Kind: abi.VarValue},
		{Name: "recent", Kind: abi.VarList, TTLMs: 3_600_000},
	}
	if err := abi.ValidateVarDecls(decls); err != nil {
		panic(err)
	}
	b := abi.AppendInitResultV2(nil, abi.StatusOK, "", decls)

	// The host side.
	status, _, got, err := abi.ParseInitResultV2(b)
	fmt.Println(status, err)
	for i, d := range got {
		fmt.Println(i, d.Name, d.Kind, d.TTLMs)
	}
	// Output:
	// 0 <nil>
	// 0 count value 0
	// 1 recent list 3600000
}

// FuzzInitResultV2: whatever a module returns from gs_init, parsing never panics, and what it
// accepts is valid and encodes back to the same bytes.
func FuzzInitResultV2(f *testing.F) {
	f.Add(abi.AppendInitResultV2(nil, abi.StatusOK, "", []abi.VarDecl{{Name: "count", Kind: abi.VarValue}, {Name: "m", Kind: abi.VarMap, TTLMs: 5}}))
	f.Add(abi.AppendInitResultV2(nil, abi.StatusOK, "", nil))
	f.Add(abi.AppendInitResultV2(nil, abi.StatusError, "boom", nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, msg, decls, err := abi.ParseInitResultV2(b)
		if err != nil {
			if !errors.Is(err, abi.ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if err := abi.ValidateVarDecls(decls); err != nil {
			t.Fatalf("accepted invalid declarations: %v", err)
		}
		if again := abi.AppendInitResultV2(nil, st, string(msg), decls); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded % x, read % x", again, b)
		}
	})
}

// TestInitResultV2ReadmeExample pins the example of abi/README.md section 9.2.
func TestInitResultV2ReadmeExample(t *testing.T) {
	b := abi.AppendInitResultV2(nil, abi.StatusOK, "", []abi.VarDecl{{Name: "count", Kind: abi.VarValue}, {Name: "events", Kind: abi.VarList, TTLMs: 60000}})
	want := "00 00 00 00 00 00 00 00 02 00 00 00 05 00 00 00 63 6f 75 6e 74 01 00 00 00 00 00 00 00 00 00 00 00 06 00 00 00 65 76 65 6e 74 73 02 00 00 00 60 ea 00 00 00 00 00 00"
	if got := fmt.Sprintf("% x", b); got != want || len(b) != 55 {
		t.Fatalf("got %s", got)
	}
}
