package jsonobj

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func members(t *testing.T, obj string) (map[string]string, error) {
	t.Helper()
	got := map[string]string{}
	err := Each([]byte(obj), func(name, value []byte) error {
		got[string(name)] = string(value)
		return nil
	})
	return got, err
}

func TestEach(t *testing.T) {
	tests := []struct {
		obj  string
		want map[string]string
	}{
		{`{}`, map[string]string{}},
		{` { } `, map[string]string{}},
		{`{"a":1}`, map[string]string{"a": "1"}},
		{`{"a" : -1.5e+3 , "b":"x\"y","c":null,"d":true,"e":false}`,
			map[string]string{"a": "-1.5e+3", "b": `"x\"y"`, "c": "null", "d": "true", "e": "false"}},
		{`{"nested":{"x":[1,{"y":[]},"]"]},"z":0}`, map[string]string{"nested": `{"x":[1,{"y":[]},"]"]}`, "z": "0"}},
		{`{"\u0061\n":1}`, map[string]string{"a\n": "1"}},
		{`{"\ud83d\ude00":1}`, map[string]string{"😀": "1"}},
		{`{"\ud83d":1}`, map[string]string{"\ufffd": "1"}},
	}
	for _, tt := range tests {
		got, err := members(t, tt.obj)
		if err != nil {
			t.Errorf("Each(%s): %v", tt.obj, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Each(%s) = %v, want %v", tt.obj, got, tt.want)
		}
	}
}

func TestEachSyntaxErrors(t *testing.T) {
	for _, obj := range []string{
		``, `[]`, `1`, `"a"`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{a:1}`,
		`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":tru}`, `{"a":nul}`,
		`{"a":"x}`, `{"a":"\x"}`, `{"a":"\u12"}`, "{\"a\":\"\x01\"}", `{"a":[1,]}`, `{"a":[1}`,
		`{"a":{"b":1]}`, `{"a":1}x`, `{"a":1}{}`, `{"a":+1}`,
		strings.Repeat(`{"a":`, 2000) + "1" + strings.Repeat("}", 2000),
	} {
		_, err := members(t, obj)
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("Each(%.40q) = %v, want ErrSyntax", obj, err)
		}
		if json.Valid([]byte(obj)) && obj[0] == '{' && len(obj) < 1000 {
			t.Errorf("test bug: %q is valid JSON", obj)
		}
	}
}

func TestEachStopsAtCallbackError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := Each([]byte(`{"a":1,"b":2}`), func(name, value []byte) error { n++; return stop })
	if err != stop || n != 1 {
		t.Fatalf("err %v after %d calls, want stop after 1", err, n)
	}
}

func TestValues(t *testing.T) {
	ints := []struct {
		in   string
		want int64
		err  error
	}{
		{"0", 0, nil}, {"-0", 0, nil}, {"42", 42, nil}, {"-42", -42, nil},
		{"9223372036854775807", math.MaxInt64, nil}, {"-9223372036854775808", math.MinInt64, nil},
		{"9223372036854775808", 0, ErrType}, {"-9223372036854775809", 0, ErrType},
		{"99999999999999999999999", 0, ErrType}, {"1.5", 0, ErrType}, {"1e3", 0, ErrType},
		{`"1"`, 0, ErrType}, {"null", 0, ErrType}, {"01", 0, ErrSyntax}, {"-", 0, ErrSyntax},
		{"", 0, ErrSyntax}, {"1 ", 0, ErrSyntax}, {"1x", 0, ErrSyntax},
	}
	for _, tt := range ints {
		got, err := Int([]byte(tt.in))
		if !errors.Is(err, tt.err) || (tt.err == nil && got != tt.want) {
			t.Errorf("Int(%q) = %d, %v; want %d, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
	for in, want := range map[string]float64{"-1.5e3": -1500, "0": 0, "7": 7, "1700000000000": 1700000000000,
		"999999999999999": 999999999999999, "9999999999999999": 9999999999999999, "-0": 0, "1.25": 1.25} {
		if f, err := Float([]byte(in)); err != nil || f != want {
			t.Errorf("Float(%s) = %v, %v; want %v", in, f, err, want)
		}
	}
	for _, in := range []string{"01", "1x", "", "00"} {
		if _, err := Float([]byte(in)); !errors.Is(err, ErrSyntax) {
			t.Errorf("Float(%q) = %v, want ErrSyntax", in, err)
		}
	}
	if _, err := Float([]byte("1e999")); !errors.Is(err, ErrType) {
		t.Errorf("Float(1e999) = %v, want ErrType", err)
	}
	if _, err := Float([]byte("Inf")); !errors.Is(err, ErrSyntax) {
		t.Errorf("Float(Inf) = %v, want ErrSyntax", err)
	}
	if b, err := Bool([]byte("true")); err != nil || !b {
		t.Errorf("Bool(true) = %v, %v", b, err)
	}
	if _, err := Bool([]byte("1")); !errors.Is(err, ErrType) {
		t.Errorf("Bool(1) = %v, want ErrType", err)
	}
	if s, err := String([]byte(`"a\tb\u00e9\/"`)); err != nil || s != "a\tbé/" {
		t.Errorf("String = %q, %v", s, err)
	}
	if _, err := String([]byte(`1`)); !errors.Is(err, ErrType) {
		t.Errorf("String(1) = %v, want ErrType", err)
	}
	if !IsNull([]byte("null")) || IsNull([]byte(`"null"`)) {
		t.Error("IsNull")
	}
}

func TestWriterMatchesEncodingJSON(t *testing.T) {
	w := NewWriter([]byte("prefix "))
	w.Int("i", -9223372036854775808)
	w.Float("f", 0.1)
	w.Float("big", 1e21)
	w.Float("small", 1e-7)
	w.Float("whole", 1700000000000)
	w.Bool("b", false)
	w.String("s", "q\"\\\n\r\t\x01<>&é\xff")
	w.String("we\"ird", "")
	w.Null("n")
	w.Raw("raw", []byte(`{"x":[1]}`))
	got, err := w.End()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"i": int64(-9223372036854775808), "f": 0.1, "big": 1e21, "small": 1e-7, "whole": 1700000000000.0,
		"b": false, "s": "q\"\\\n\r\t\x01<>&é\ufffd", "we\"ird": "", "n": nil, "raw": map[string]any{"x": []any{1.0}}}
	if !strings.HasPrefix(string(got), "prefix ") {
		t.Fatalf("lost the prefix: %s", got)
	}
	body := got[len("prefix "):]
	var back map[string]any
	if err := json.Unmarshal(body, &back); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	back["i"] = int64(back["i"].(float64))
	if !reflect.DeepEqual(back, want) {
		t.Fatalf("round trip:\n got %v\nwant %v", back, want)
	}
	// Numbers are written as encoding/json writes them.
	for _, f := range []float64{0.1, 1e21, 1e-7, 1700000000000, -0.5, 123456.789} {
		w := NewWriter(nil)
		w.Float("v", f)
		got, _ := w.End()
		ref, _ := json.Marshal(map[string]float64{"v": f})
		if string(got) != string(ref) {
			t.Errorf("Float(%v) = %s, encoding/json %s", f, got, ref)
		}
	}
}

func TestWriterRejectsNaN(t *testing.T) {
	w := NewWriter(nil)
	w.Float("x", math.NaN())
	if _, err := w.End(); !errors.Is(err, ErrUnsupportedValue) {
		t.Fatalf("NaN: %v", err)
	}
}

// FuzzEach checks Each against encoding/json: it accepts exactly the objects encoding/json
// accepts (for valid UTF-8 input) and reports the same members.
func FuzzEach(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[1,2,{"c":null}]}`, `{"\u00e9":"x\ny"}`, `{"a":01}`, `[1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) {
			return // Each does not check UTF-8 (the host has); encoding/json replaces it
		}
		var ref map[string]json.RawMessage
		refErr := json.Unmarshal(b, &ref)
		got := map[string]json.RawMessage{}
		err := Each(b, func(name, value []byte) error {
			got[string(name)] = append(json.RawMessage(nil), value...)
			return nil
		})
		if !json.Valid(b) {
			if err == nil {
				t.Fatalf("Each accepted invalid JSON %q", b)
			}
			return
		}
		if (refErr == nil) != (err == nil) {
			t.Fatalf("%q: Each %v, encoding/json %v", b, err, refErr)
		}
		if err != nil {
			return
		}
		for k, v := range ref {
			if string(got[k]) != string(v) {
				t.Fatalf("%q: member %q = %s, encoding/json %s", b, k, got[k], v)
			}
		}
		if len(got) != len(ref) {
			t.Fatalf("%q: %d members, encoding/json %d", b, len(got), len(ref))
		}
	})
}

// FuzzIntMatchesEncodingJSON checks Int against decoding into an int64.
func FuzzIntMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{"0", "-1", "9223372036854775807", "1e2", "01", "1.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var ref int64
		refErr := json.Unmarshal([]byte(s), &ref)
		got, err := Int([]byte(s))
		if refErr == nil && (err != nil || got != ref) && strings.TrimSpace(s) == s {
			t.Fatalf("Int(%q) = %d, %v; encoding/json %d", s, got, err, ref)
		}
		if refErr != nil && err == nil {
			t.Fatalf("Int(%q) = %d, encoding/json failed: %v", s, got, refErr)
		}
	})
}

// TestEachLengths: names and string values of every length up to 20, plain or with an escape
// at any position, end where encoding/json says, wherever they fall against the words Each
// scans and the buffer's last eight bytes.
func TestEachLengths(t *testing.T) {
	for n := 0; n <= 20; n++ {
		for p := -1; p < n; p++ {
			str := strings.Repeat("a", n)
			if p >= 0 {
				str = str[:p] + `\"` + str[p:]
			}
			for _, doc := range []string{`{"` + str + `":"` + str + `"}`, `{"` + str + `":"` + str + `","k":1}`, `{"k":"` + str + `"}`} {
				var want map[string]json.RawMessage
				if err := json.Unmarshal([]byte(doc), &want); err != nil {
					t.Fatal(err)
				}
				got := map[string]string{}
				if err := Each([]byte(doc), func(name, value []byte) error {
					got[string(name)] = string(value)
					return nil
				}); err != nil {
					t.Fatalf("Each(%s): %v", doc, err)
				}
				if len(got) != len(want) {
					t.Fatalf("Each(%s): %v, want %s", doc, got, want)
				}
				for k, v := range want {
					if got[k] != string(v) {
						t.Fatalf("Each(%s): %q = %s, want %s", doc, k, got[k], v)
					}
				}
			}
		}
	}
}
