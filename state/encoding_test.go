package state

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
)

func TestEntryEncoding(t *testing.T) {
	tests := []struct {
		name string
		in   Entry
		want Entry // decoded form
	}{
		{"value", val("abc"), val("abc")},
		{"empty value", Entry{Value: []byte{}, HasValue: true}, Entry{Value: []byte{}, HasValue: true}},
		{"value and timeout", valT("x", 1234), valT("x", 1234)},
		{"timeout only", Entry{TimeoutMs: 99}, Entry{TimeoutMs: 99}},
		{"negative timeout", Entry{TimeoutMs: -5}, Entry{TimeoutMs: -5}},
		{"value ignored without HasValue", Entry{Value: []byte("junk"), TimeoutMs: 7}, Entry{TimeoutMs: 7}},
		{"max timeout", valT("m", math.MaxInt64), valT("m", math.MaxInt64)},
		{"update time", Entry{Value: []byte("v"), HasValue: true, TimeoutMs: 3, UpdatedMs: 1700000000000}, Entry{Value: []byte("v"), HasValue: true, TimeoutMs: 3, UpdatedMs: 1700000000000}},
		{"update time dropped without a value", Entry{TimeoutMs: 3, UpdatedMs: 5}, Entry{TimeoutMs: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeEntry(appendEntry(nil, tc.in))
			requireNoError(t, err)
			requireEqual(t, tc.want, got)
		})
	}
}

func TestEntryDecodeCorrupt(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"short", []byte{1, 0, 0}},
		{"unknown flag", append([]byte{4}, make([]byte, 8)...)},
		{"timeout flag without timeout", append([]byte{flagTimeout}, make([]byte, 8)...)},
		{"timeout without flag", []byte{0, 0, 0, 0, 0, 0, 0, 0, 1}},
		{"bytes without value flag", []byte{flagTimeout, 0, 0, 0, 0, 0, 0, 0, 1, 'x'}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeEntry(tc.in)
			requireErrorIs(t, err, ErrCorrupt)
		})
	}
}

// outboxFields sets, one by one, every field of an outbox value.
var outboxFields = []struct {
	name string
	set  func(e *OutboxEntry)
}{
	{"key", func(e *OutboxEntry) { e.Key = []byte(`"u1"`) }},
	{"payload", func(e *OutboxEntry) { e.Payload = []byte(`{"n":1}`) }},
	{"reason", func(e *OutboxEntry) { e.Reason = "invalid_json" }},
	{"error", func(e *OutboxEntry) { e.Error = "unexpected end of JSON input" }},
	{"subject", func(e *OutboxEntry) { e.Subject = "in.logins" }},
	{"sequence", func(e *OutboxEntry) { e.Sequence = 17 }},
	{"timeout call", func(e *OutboxEntry) { e.TimeoutCall = true }},
}

// normOutbox returns e with empty Key and Payload as nil, for comparisons.
func normOutbox(e OutboxEntry) OutboxEntry {
	if len(e.Key) == 0 {
		e.Key = nil
	}
	if len(e.Payload) == 0 {
		e.Payload = nil
	}
	return e
}

// checkOutboxValue encodes in, decodes it, and checks the round trip, the determinism of the
// encoding, and that every cut before the payload fails to decode.
func checkOutboxValue(t *testing.T, in OutboxEntry) {
	t.Helper()
	enc := appendOutboxValue([]byte("prefix"), &in)[len("prefix"):]
	got := OutboxEntry{ID: in.ID}
	requireNoError(t, decodeOutboxValue(enc, &got))
	requireEqual(t, normOutbox(in), normOutbox(got))
	requireEqual(t, enc, appendOutboxValue(nil, &got))
	if len(got.Key) > 0 && cap(got.Key) != len(got.Key) {
		t.Fatalf("decoded key has capacity %d > length %d: an append would overwrite the value", cap(got.Key), len(got.Key))
	}
	// A cut inside the payload is indistinguishable from a shorter payload;
	// any cut before it must fail.
	for i := 0; i < len(enc)-len(in.Payload); i++ {
		e := OutboxEntry{ID: in.ID}
		requireErrorIs(t, decodeOutboxValue(enc[:i], &e), ErrCorrupt)
		requireEqual(t, OutboxEntry{ID: in.ID}, e, "entry after a failed decode of %d bytes", i)
	}
}

// TestOutboxValueEncoding round-trips every combination of fields, with each kind.
func TestOutboxValueEncoding(t *testing.T) {
	kinds := []OutboxKind{OutboxOutput, OutboxDeadLetter, OutboxLate}
	for mask := 0; mask < 1<<len(outboxFields); mask++ {
		for _, kind := range kinds {
			in := OutboxEntry{ID: OutboxID{BatchID: 7, Seq: uint32(mask)}, Kind: kind}
			var names []string
			for i, f := range outboxFields {
				if mask&(1<<i) != 0 {
					f.set(&in)
					names = append(names, f.name)
				}
			}
			name := fmt.Sprintf("%s/%s", kind, strings.Join(names, "+"))
			t.Run(name, func(t *testing.T) { checkOutboxValue(t, in) })
		}
	}
}

func TestOutboxValueEncodingEdges(t *testing.T) {
	long := strings.Repeat("e", 300) // two-byte length
	tests := []struct {
		name string
		in   OutboxEntry
	}{
		{"zero", OutboxEntry{}},
		{"max sequence", OutboxEntry{Kind: OutboxLate, Sequence: math.MaxUint64}},
		{"sequence 1", OutboxEntry{Kind: OutboxLate, Sequence: 1}},
		{"long fields", OutboxEntry{Kind: OutboxDeadLetter, Key: []byte(long), Reason: long, Error: long, Subject: long, Payload: []byte(long)}},
		{"binary fields", OutboxEntry{Kind: OutboxDeadLetter, Key: []byte{0, 0xff}, Reason: "\x00", Error: "\xff\x80", Subject: "\x00\x00", Payload: []byte{0x80}}},
		{"big payload", OutboxEntry{Kind: OutboxOutput, Key: []byte(`"k"`), Payload: bytes.Repeat([]byte("p"), 1<<16)}},
		{"unknown kind", OutboxEntry{Kind: 200, Payload: []byte("x")}},
		{"timeout call dead letter", OutboxEntry{Kind: OutboxDeadLetter, Key: []byte(`42`), Reason: "handler_error", Error: "trap", TimeoutCall: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkOutboxValue(t, tc.in) })
	}
}

// TestOutboxValueLayout pins the bytes of the format-2 value (see doc.go).
func TestOutboxValueLayout(t *testing.T) {
	tests := []struct {
		name string
		in   OutboxEntry
		want []byte
	}{
		{"output", OutboxEntry{Kind: OutboxOutput, Key: []byte("k"), Payload: []byte("p")}, []byte("\x01\x00\x01kp")},
		{"timeout call", OutboxEntry{Kind: OutboxDeadLetter, TimeoutCall: true}, []byte("\x02\x01\x00")},
		{"all", OutboxEntry{Kind: OutboxLate, Key: []byte("k"), Reason: "r", Error: "ee", Subject: "s", Sequence: 300, Payload: []byte("p"), TimeoutCall: true},
			[]byte("\x03\x1f\x01k\x01r\x02ee\x01s\xac\x02p")},
		{"subject only", OutboxEntry{Kind: OutboxDeadLetter, Subject: "s"}, []byte("\x02\x08\x00\x01s")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			requireEqual(t, tc.want, appendOutboxValue(nil, &tc.in))
		})
	}
}

func TestOutboxDecodeCorrupt(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"kind only", []byte{1}},
		{"no key length", []byte{1, 0}},
		{"unknown flag", []byte{1, 0x20, 0}},
		{"high flag", []byte{1, 0x80, 0}},
		{"key longer than value", []byte{1, 0, 5, 'a', 'b'}},
		{"key length overflows", append([]byte{1, 0}, bytes.Repeat([]byte{0xff}, 10)...)},
		{"key length unterminated", []byte{1, 0, 0x80}},
		{"reason flag without reason", []byte{2, outboxHasReason, 0}},
		{"empty reason", []byte{2, outboxHasReason, 0, 0, 'p'}},
		{"reason cut", []byte{2, outboxHasReason, 0, 3, 'a'}},
		{"error flag without error", []byte{2, outboxHasError, 0}},
		{"empty error", []byte{2, outboxHasError, 0, 0}},
		{"subject flag without subject", []byte{2, outboxHasReason | outboxHasSubject, 0, 1, 'r'}},
		{"empty subject", []byte{2, outboxHasSubject, 0, 0}},
		{"sequence flag without sequence", []byte{3, outboxHasSequence, 0}},
		{"zero sequence", []byte{3, outboxHasSequence, 0, 0, 'p'}},
		{"sequence unterminated", []byte{3, outboxHasSequence, 0, 0x80}},
		{"sequence overflows", append([]byte{3, outboxHasSequence, 0}, bytes.Repeat([]byte{0xff}, 10)...)},
		{"v1 value with headers", appendOutboxValueV1(nil, OutboxDeadLetter, []byte(`"u1"`), []byte("p"), map[string]string{v1HeaderReason: "x"})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := OutboxEntry{ID: OutboxID{3, 4}}
			err := decodeOutboxValue(tc.in, &e)
			requireErrorIs(t, err, ErrCorrupt)
			if !strings.Contains(err.Error(), "outbox entry 3.4") {
				t.Fatalf("error %q does not name the entry", err)
			}
		})
	}
}

// TestOutboxDecodeAllocs: a decode allocates nothing but the strings it returns.
func TestOutboxDecodeAllocs(t *testing.T) {
	tests := []struct {
		name   string
		in     OutboxEntry
		allocs float64
	}{
		{"output", OutboxEntry{Kind: OutboxOutput, Key: []byte(`"u1"`), Payload: []byte(`{"n":1}`)}, 0},
		{"timeout call", OutboxEntry{Kind: OutboxDeadLetter, Key: []byte(`"u1"`), TimeoutCall: true, Sequence: 9}, 0},
		{"dead letter", OutboxEntry{Kind: OutboxDeadLetter, Key: []byte(`"u1"`), Reason: "invalid_json", Error: "bad", Subject: "in.x", Sequence: 9, Payload: []byte("{")}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := appendOutboxValue(nil, &tc.in)
			buf := make([]byte, 0, 256)
			var e OutboxEntry
			n := testing.AllocsPerRun(100, func() {
				if err := decodeOutboxValue(enc, &e); err != nil {
					t.Fatal(err)
				}
				buf = appendOutboxValue(buf[:0], &e)
			})
			if n != tc.allocs {
				t.Fatalf("%v allocations per decode and encode, want %v", n, tc.allocs)
			}
		})
	}
}

func TestProgressEncoding(t *testing.T) {
	for _, p := range []Progress{
		{},
		{BatchID: 1, WatermarkMs: -1, Position: 2, Keys: 3, TimerKeys: 4},
		{BatchID: math.MaxUint64, WatermarkMs: math.MinInt64, Position: math.MaxUint64, Keys: math.MaxInt64, TimerKeys: 0},
	} {
		got, err := decodeProgress(appendProgress(nil, p))
		requireNoError(t, err)
		requireEqual(t, p, got)
	}
	_, err := decodeProgress([]byte{1, 2})
	requireErrorIs(t, err, ErrCorrupt)
}

func TestTimerKeyOrder(t *testing.T) {
	prefix := deploymentPrefix("x")
	in := []timer{
		{"b", 5}, {"a", 5}, {"z", -3}, {"a", math.MinInt64}, {"c", math.MaxInt64}, {"", 5}, {"a", 0 + 1}, {"ab", 5},
	}
	keys := make([]string, len(in))
	for i, tm := range in {
		keys[i] = string(timerKey(nil, prefix, tm.Ts, []byte(tm.Key)))
	}
	sort.Strings(keys)
	var got []timer
	for _, k := range keys {
		ts, key, ok := parseTimerKey([]byte(k)[len(prefix)+1:])
		if !ok {
			t.Fatal("parse failed")
		}
		got = append(got, timer{string(key), ts})
	}
	want := []timer{
		{"a", math.MinInt64}, {"z", -3}, {"a", 1}, {"", 5}, {"a", 5}, {"ab", 5}, {"b", 5}, {"c", math.MaxInt64},
	}
	requireEqual(t, want, got)
}

func TestPrefixEnd(t *testing.T) {
	tests := []struct{ in, want []byte }{
		{[]byte("a"), []byte("b")},
		{[]byte{'a', 0xff}, []byte("b")},
		{[]byte{0xff, 0xff}, nil},
		{deploymentPrefix("a"), []byte("d\x01b")},
	}
	for _, tc := range tests {
		requireEqual(t, tc.want, prefixEnd(tc.in), "prefixEnd(%q)", tc.in)
	}
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"logincount", true},
		{"my-deploy-2", true},
		{string(bytes.Repeat([]byte("a"), 255)), true},
		{"", false},
		{string(bytes.Repeat([]byte("a"), 256)), false},
		{"Upper", false},
		{"under_score", false},
		{"dot.name", false},
		{"sp ace", false},
		{"logincount.0", true},
		{"logincount.1023", true},
		{PartitionName("my-deploy-2", 7), true},
		{".3", false},
		{"logincount.", false},
		{"logincount.07", false},
		{"logincount.-1", false},
		{"logincount.1.2", false},
	}
	for _, tc := range tests {
		err := ValidateName(tc.name)
		if tc.ok {
			requireNoError(t, err)
		} else {
			requireErrorIs(t, err, ErrInvalidName)
		}
	}
}

func TestOptions(t *testing.T) {
	o := (&Options{}).EnsureDefaults()
	requireNoError(t, o.Validate())
	requireEqual(t, int64(DefaultCacheSize), o.CacheSize)
	requireEqual(t, uint64(DefaultMemTableSize), o.MemTableSize)
	if o.FS == nil || o.Logger == nil {
		t.Fatal("defaults not filled in")
	}
	requireNoError(t, (*Options)(nil).EnsureDefaults().Validate())
	bad := (&Options{CacheSize: -1}).EnsureDefaults()
	if bad.Validate() == nil {
		t.Fatal("negative cache size accepted")
	}
	if (&Options{MemTableSize: 1000}).EnsureDefaults().Validate() == nil {
		t.Fatal("tiny MemTableSize accepted")
	}
	if (&Options{}).Validate() == nil {
		t.Fatal("Options without defaults accepted")
	}
}
