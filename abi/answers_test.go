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

// answer is a decoded Answer with its elements, entries and timers, for comparisons.
type answer struct {
	present bool
	value   string
	count   uint32
	next    uint64
	more    bool
	mapNext string
	elems   []string
	entries []string // "key=value"
	timers  []int64
}

func toAnswer(t testing.TB, a *abi.Answer) answer {
	d := answer{present: a.Present, value: string(a.Value), count: a.Count, next: a.Next, more: a.More, mapNext: string(a.MapNext)}
	for e := range a.Elements() {
		d.elems = append(d.elems, string(e))
	}
	for k, v := range a.Entries() {
		d.entries = append(d.entries, string(k)+"="+string(v))
	}
	for ts := range a.Timers() {
		d.timers = append(d.timers, ts)
	}
	for i, ts := range d.timers {
		if a.Timer(i) != ts {
			t.Fatalf("Timer(%d) = %d, Timers gave %d", i, a.Timer(i), ts)
		}
	}
	if n := len(d.elems) + len(d.entries) + len(d.timers); n != int(a.Count) {
		t.Fatalf("Count %d, iterated %d", a.Count, n)
	}
	return d
}

func equalAnswer(a, b answer) bool {
	return a.present == b.present && a.value == b.value && a.count == b.count && a.next == b.next && a.more == b.more &&
		a.mapNext == b.mapNext && slices.Equal(a.elems, b.elems) && slices.Equal(a.entries, b.entries) && slices.Equal(a.timers, b.timers)
}

// answerCases has an answer of every shape, encoded, and what decoding it gives.
var answerCases = []struct {
	name string
	op   abi.Op
	enc  []byte
	want answer
}{
	{"value absent", abi.OpValueGet, abi.AppendValueAnswer(nil, false, []byte("ignored")), answer{}},
	{"value present", abi.OpValueGet, abi.AppendValueAnswer(nil, true, []byte(`{"n":1}`)), answer{present: true, value: `{"n":1}`}},
	{"value empty", abi.OpValueGet, abi.AppendValueAnswer(nil, true, nil), answer{present: true}},
	{"map get", abi.OpMapGet, abi.AppendValueAnswer(nil, true, []byte("v")), answer{present: true, value: "v"}},
	{"map get absent", abi.OpMapGet, abi.AppendValueAnswer(nil, false, nil), answer{}},
	{"map contains", abi.OpMapContains, abi.AppendBoolAnswer(nil, true), answer{present: true}},
	{"list exists", abi.OpListExists, abi.AppendBoolAnswer(nil, false), answer{}},
	{"map exists", abi.OpMapExists, abi.AppendBoolAnswer(nil, true), answer{present: true}},
	{"list page", abi.OpListRead, abi.AppendListReadAnswer(nil, [][]byte{[]byte("a"), nil, []byte("ccc")}, 1<<40), answer{count: 3, next: 1 << 40, elems: []string{"a", "", "ccc"}}},
	{"list last page", abi.OpListRead, abi.AppendListReadAnswer(nil, [][]byte{[]byte("z")}, 0), answer{count: 1, elems: []string{"z"}}},
	{"list empty", abi.OpListRead, abi.AppendListReadAnswer(nil, nil, 0), answer{}},
	{"map page", abi.OpMapRead, abi.AppendMapReadAnswer(nil, []abi.MapEntry{{Key: nil, Value: []byte("e")}, {Key: []byte("a"), Value: []byte("1")}, {Key: []byte("ab"), Value: nil}}, true, []byte("cur")),
		answer{count: 3, more: true, mapNext: "cur", entries: []string{"=e", "a=1", "ab="}}},
	{"map last page", abi.OpMapRead, abi.AppendMapReadAnswer(nil, []abi.MapEntry{{Key: []byte("k"), Value: []byte("v")}}, false, nil), answer{count: 1, entries: []string{"k=v"}}},
	{"map empty", abi.OpMapRead, abi.AppendMapReadAnswer(nil, nil, false, nil), answer{}},
	{"timers", abi.OpTimerList, abi.AppendTimerListAnswer(nil, []int64{-1, 0, 1 << 50}), answer{count: 3, timers: []int64{-1, 0, 1 << 50}}},
	{"no timers", abi.OpTimerList, abi.AppendTimerListAnswer(nil, nil), answer{}},
}

func TestAnswerRoundTrip(t *testing.T) {
	var all []byte
	for _, tc := range answerCases {
		all = append(all, tc.enc...)
		t.Run(tc.name, func(t *testing.T) {
			ar := abi.NewAnswerReader(tc.enc)
			var a abi.Answer
			if err := ar.Next(tc.op, &a); err != nil {
				t.Fatal(err)
			}
			if got := toAnswer(t, &a); a.Op != tc.op || !equalAnswer(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if err := ar.Finish(); err != nil {
				t.Fatal(err)
			}
		})
	}
	// All answers back to back, as the host returns them.
	readAll := func(b []byte) error {
		ar := abi.NewAnswerReader(b)
		var a abi.Answer
		for i, tc := range answerCases {
			if err := ar.Next(tc.op, &a); err != nil {
				return err
			}
			if got := toAnswer(t, &a); !equalAnswer(got, tc.want) {
				t.Fatalf("answer %d: got %+v, want %+v", i, got, tc.want)
			}
		}
		return ar.Finish()
	}
	if err := readAll(all); err != nil {
		t.Fatal(err)
	}
	for i := range all {
		if err := readAll(all[:i]); !errors.Is(err, abi.ErrMalformed) {
			t.Fatalf("truncated at %d: err = %v", i, err)
		}
	}
	if err := readAll(append(all, 0)); !errors.Is(err, abi.ErrMalformed) || !strings.Contains(err.Error(), "trailing bytes after 16 answers") {
		t.Fatalf("trailing byte: err = %v", err)
	}
}

// TestAnswerLayout pins the byte layout of abi/README.md section 9.4's answers.
func TestAnswerLayout(t *testing.T) {
	var b []byte
	b = abi.AppendValueAnswer(b, true, []byte("ab"))
	b = abi.AppendValueAnswer(b, false, nil)
	b = abi.AppendBoolAnswer(b, true)
	b = abi.AppendListReadAnswer(b, [][]byte{[]byte("x")}, 9)
	b = abi.AppendMapReadAnswer(b, []abi.MapEntry{{Key: []byte("k"), Value: []byte("v")}}, true, []byte("c"))
	b = abi.AppendTimerListAnswer(b, []int64{1000})
	want := []byte{
		1, 2, 0, 0, 0, 'a', 'b', // VALUE_GET: present, "ab"
		0,                                                   // VALUE_GET: absent
		1,                                                   // MAP_CONTAINS: true
		1, 0, 0, 0, 1, 0, 0, 0, 'x', 9, 0, 0, 0, 0, 0, 0, 0, // LIST_READ: 1 element, next 9
		1, 0, 0, 0, 1, 0, 0, 0, 'k', 1, 0, 0, 0, 'v', 1, 1, 0, 0, 0, 'c', // MAP_READ: 1 entry, more, next "c"
		1, 0, 0, 0, 0xe8, 3, 0, 0, 0, 0, 0, 0, // TIMER_LIST: 1000
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("got % x\nwant % x", b, want)
	}
}

func TestAnswerMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   abi.Op
		b    []byte
		want string
	}{
		{"present 2", abi.OpValueGet, []byte{2, 0, 0, 0, 0}, "answer 0 (VALUE_GET): present is 2, not 0 or 1"},
		{"bool 255", abi.OpMapExists, []byte{255}, "(MAP_EXISTS): answer is 255"},
		{"truncated value", abi.OpMapGet, []byte{1, 3, 0, 0, 0, 'a'}, "(MAP_GET): truncated"},
		{"empty", abi.OpListExists, nil, "(LIST_EXISTS): truncated"},
		{"absurd list count", abi.OpListRead, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0}, "4294967295 elements cannot fit"},
		{"list without elements but next", abi.OpListRead, abi.AppendListReadAnswer(nil, nil, 3), "no elements but next is not 0"},
		{"list truncated next", abi.OpListRead, abi.AppendListReadAnswer(nil, [][]byte{nil}, 3)[:11], "(LIST_READ): truncated"},
		{"absurd map count", abi.OpMapRead, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0}, "4294967295 entries cannot fit"},
		{"map without entries but more", abi.OpMapRead, abi.AppendMapReadAnswer(nil, nil, true, []byte("c")), "no entries but more is 1"},
		{"map next without more", abi.OpMapRead, abi.AppendMapReadAnswer(nil, []abi.MapEntry{{}}, false, []byte("c")), "more is 0 but next is not empty"},
		{"map more 2", abi.OpMapRead, append(abi.AppendTimerListAnswer(nil, nil), 2, 0, 0, 0, 0), "more is 2"},
		{"map keys descending", abi.OpMapRead, abi.AppendMapReadAnswer(nil, []abi.MapEntry{{Key: []byte("b")}, {Key: []byte("a")}}, false, nil), "keys not in strictly ascending order at entry 1"},
		{"map keys repeated", abi.OpMapRead, abi.AppendMapReadAnswer(nil, []abi.MapEntry{{Key: []byte("a")}, {Key: []byte("a")}}, false, nil), "at entry 1"},
		{"absurd timer count", abi.OpTimerList, []byte{2, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}, "2 timers cannot fit"},
		{"timers descending", abi.OpTimerList, abi.AppendTimerListAnswer(nil, []int64{1, 3, 2}), "timers not in strictly ascending order at timer 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ar := abi.NewAnswerReader(tc.b)
			var a abi.Answer
			err := ar.Next(tc.op, &a)
			if !errors.Is(err, abi.ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if err2 := ar.Next(abi.OpTimerList, &a); err2 != err {
				t.Fatalf("after the error: %v", err2)
			}
			if err2 := ar.Finish(); err2 != err {
				t.Fatalf("Finish after the error: %v", err2)
			}
		})
	}
}

func TestAnswerNotRead(t *testing.T) {
	ar := abi.NewAnswerReader([]byte{1})
	var a abi.Answer
	if err := ar.Next(abi.OpValueSet, &a); err == nil || errors.Is(err, abi.ErrMalformed) {
		t.Fatalf("VALUE_SET: err = %v, want a caller error", err)
	}
	// The reader is still usable.
	if err := ar.Next(abi.OpListExists, &a); err != nil || !a.Present {
		t.Fatalf("LIST_EXISTS: %v %+v", err, a)
	}
}

func TestAnswerOtherKindsAreEmpty(t *testing.T) {
	var a abi.Answer
	if err := abi.NewAnswerReader(abi.AppendValueAnswer(nil, true, []byte("v"))).Next(abi.OpValueGet, &a); err != nil {
		t.Fatal(err)
	}
	c, e := a.ElementCursor(), a.EntryCursor()
	if _, ok := c.Next(); ok {
		t.Fatal("elements of a VALUE_GET answer")
	}
	if _, _, ok := e.Next(); ok {
		t.Fatal("entries of a VALUE_GET answer")
	}
	for range a.Timers() {
		t.Fatal("timers of a VALUE_GET answer")
	}
}

func ExampleAnswerReader() {
	// The guest asks for a value and the first page of a map...
	var req abi.OpWriter
	req.ValueGet(0)
	req.MapRead(1, nil, 4096)

	// ... the host answers both, back to back ...
	resp := abi.AppendValueAnswer(nil, true, []byte("42"))
	resp = abi.AppendMapReadAnswer(resp, []abi.MapEntry{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}}, false, nil)

	// ... and the guest decodes the answers of the reads it sent, in order.
	ar := abi.NewAnswerReader(resp)
	var a abi.Answer
	if err := ar.Next(abi.OpValueGet, &a); err != nil {
		panic(err)
	}
	fmt.Println(a.Present, string(a.Value))
	if err := ar.Next(abi.OpMapRead, &a); err != nil {
		panic(err)
	}
	for k, v := range a.Entries() {
		fmt.Println(string(k), string(v))
	}
	fmt.Println("more:", a.More, "finish:", ar.Finish())
	// Output:
	// true 42
	// a 1
	// b 2
	// more: false finish: <nil>
}

// readOpsForFuzz are the read ops, in the order FuzzAnswerReader picks them from a byte.
var readOpsForFuzz = []abi.Op{abi.OpValueGet, abi.OpListRead, abi.OpListExists, abi.OpMapGet, abi.OpMapContains, abi.OpMapRead, abi.OpMapExists, abi.OpTimerList}

// FuzzAnswerReader: whatever the host answers, the guest decodes it without panicking and
// fails only with ErrMalformed.
func FuzzAnswerReader(f *testing.F) {
	var all []byte
	var ops []byte
	for _, tc := range answerCases {
		all = append(all, tc.enc...)
		ops = append(ops, byte(slices.Index(readOpsForFuzz, tc.op)))
	}
	f.Add(ops, all)
	f.Fuzz(func(t *testing.T, ops, b []byte) {
		ar := abi.NewAnswerReader(b)
		var a abi.Answer
		for _, o := range ops {
			op := readOpsForFuzz[int(o)%len(readOpsForFuzz)]
			if err := ar.Next(op, &a); err != nil {
				if !errors.Is(err, abi.ErrMalformed) {
					t.Fatalf("error does not wrap ErrMalformed: %v", err)
				}
				return
			}
			toAnswer(t, &a)
		}
		if err := ar.Finish(); err != nil && !errors.Is(err, abi.ErrMalformed) {
			t.Fatal(err)
		}
	})
}

// TestOpsReadmeExample pins the example of abi/README.md section 9.4.
func TestOpsReadmeExample(t *testing.T) {
	var w abi.OpWriter
	w.ValueSet(0, []byte("3"))
	w.ListRead(1, 0, 4096)
	w.TimerList()
	if got, want := fmt.Sprintf("% x", w.Bytes()), "02 00 00 00 00 01 00 00 00 33 10 01 00 00 00 00 00 00 00 00 00 00 00 00 10 00 00 32"; got != want {
		t.Fatalf("request % x", w.Bytes())
	}
	a := abi.AppendListReadAnswer(nil, [][]byte{[]byte(`{"e":1}`)}, 0)
	a = abi.AppendTimerListAnswer(a, []int64{60000})
	if got, want := fmt.Sprintf("% x", a), "01 00 00 00 07 00 00 00 7b 22 65 22 3a 31 7d 00 00 00 00 00 00 00 00 01 00 00 00 60 ea 00 00 00 00 00 00"; got != want {
		t.Fatalf("answers % x", a)
	}
}
