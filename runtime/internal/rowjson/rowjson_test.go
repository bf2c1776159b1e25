package rowjson

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestLookup(t *testing.T) {
	tests := []struct {
		row, path, want string
		err             error
	}{
		{`{"user_id":"x"}`, "user_id", `"x"`, nil},
		{` { "a" : 1 , "user_id" : 42 } `, "user_id", `42`, nil},
		{`{"a":{"b":[1,{"c":"}"}],"d":"x"},"user_id":"y"}`, "user_id", `"y"`, nil},
		{`{"a":{"b":{"c":"deep"}}}`, "a.b.c", `"deep"`, nil},
		{`{"a":{"b":1}}`, "a.b.c", ``, ErrMissing},
		{`{"us\u0065r":"esc"}`, "user", `"esc"`, nil},
		{`{"s":"a\"b","k":true}`, "k", `true`, nil},
		{`{"k":null}`, "k", ``, ErrMissing},
		{`{"other":1}`, "k", ``, ErrMissing},
		{`{"k":"a\\","z":2}`, "z", `2`, nil},
		{`{"k":"first","k":"last"}`, "k", `"last"`, nil},
		{`{"K":"upper"}`, "k", ``, ErrMissing},
	}
	for _, tc := range tests {
		t.Run(tc.row+"/"+tc.path, func(t *testing.T) {
			if err := Validate([]byte(tc.row)); err != nil {
				t.Fatal(err)
			}
			p, err := ParsePath(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Lookup([]byte(tc.row), p)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if string(got) != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		row string
		err error
	}{
		{`{"a":1}`, nil},
		{`{"a":1`, ErrInvalidJSON},
		{`[1,2]`, ErrNotObject},
		{`"x"`, ErrNotObject},
		{`{"a":1} {"b":2}`, ErrInvalidJSON},
		{"{\"a\":\"\xff\"}", ErrNotUTF8},
		{``, ErrInvalidJSON},
	}
	for _, tc := range tests {
		if err := Validate([]byte(tc.row)); !errors.Is(err, tc.err) {
			t.Errorf("Validate(%q) = %v, want %v", tc.row, err, tc.err)
		}
	}
}

func TestCanonicalKey(t *testing.T) {
	tests := []struct {
		tok, want string
		err       error
	}{
		{`"alice"`, `"alice"`, nil},
		{`"\u0061lice"`, `"alice"`, nil},
		{`"a\u003cb"`, `"a<b"`, nil},
		{`"a<b"`, `"a<b"`, nil},
		{`"\u2028"`, "\"\u2028\"", nil},
		{`"q\"\\\/\n\u0001"`, `"q\"\\/\n\u0001"`, nil},
		{`42`, `42`, nil},
		{`-0`, `0`, nil},
		{`1.0`, `1`, nil},
		{`1e3`, `1000`, nil},
		{`1.5`, `1.5`, nil},
		{`123456789012345678901234567890`, `123456789012345678901234567890`, nil},
		// Numbers are keys by value, however they are spelled and however large.
		{`1e22`, `10000000000000000000000`, nil},
		{`10000000000000000000000`, `10000000000000000000000`, nil},
		{`1.0E+22`, `10000000000000000000000`, nil},
		{`100000000000000000000.00e2`, `10000000000000000000000`, nil},
		{`10000000000000000000001`, `10000000000000000000001`, nil},
		{`4.2e1`, `42`, nil},
		{`420e-1`, `42`, nil},
		{`-0.0`, `0`, nil},
		{`0e5`, `0`, nil},
		{`-1.5`, `-1.5`, nil},
		{`0.1`, `0.1`, nil},
		{`1e-7`, `1e-07`, nil},
		{`0.10000000000000000001`, `0.10000000000000000001`, nil},
		{`1.0000000000000000000001e-10`, `1.0000000000000000000001e-10`, nil},
		{`1.5e300`, `1.5e300`, nil},
		{`-2e70`, `-2e70`, nil},
		{`1e999999`, ``, ErrNotScalar},
		{`true`, ``, ErrNotScalar},
		{`{"a":1}`, ``, ErrNotScalar},
		{`[1]`, ``, ErrNotScalar},
	}
	for _, tc := range tests {
		got, err := AppendCanonicalKey(nil, []byte(tc.tok))
		if !errors.Is(err, tc.err) || string(got) != tc.want {
			t.Errorf("AppendCanonicalKey(%s) = %q, %v; want %q, %v", tc.tok, got, err, tc.want, tc.err)
		}
	}
}

func TestParsePath(t *testing.T) {
	for _, bad := range []string{"", ".", "a..b", "a."} {
		if _, err := ParsePath(bad); err == nil {
			t.Errorf("ParsePath(%q) succeeded", bad)
		}
	}
}

func FuzzLookup(f *testing.F) {
	f.Add([]byte(`{"user_id":"x","ts":1}`), "user_id")
	f.Add([]byte(`{"a":{"b":[1,{"c":"}"}]}}`), "a.b")
	f.Add([]byte(`{"k":"\u00e9"}`), "k")
	f.Fuzz(func(t *testing.T, row []byte, path string) {
		if Validate(row) != nil {
			return
		}
		p, err := ParsePath(path)
		if err != nil {
			return
		}
		tok, err := Lookup(row, p)
		if err != nil {
			return
		}
		c, err := AppendCanonicalKey(nil, tok)
		if err != nil {
			return
		}
		// Canonical form is a fixed point and means the same value.
		if again, err := AppendCanonicalKey(nil, c); err != nil || string(again) != string(c) {
			t.Fatalf("canonical %s of %s is not canonical: %s, %v", c, tok, again, err)
		}
		if tok[0] == '"' {
			var a, b string
			if json.Unmarshal(tok, &a) != nil || json.Unmarshal(c, &b) != nil || a != b {
				t.Fatalf("canonical %s of %s changed the string", c, tok)
			}
		}
	})
}
