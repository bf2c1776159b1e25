package state

import (
	"bytes"
	"math"
	"sort"
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

func TestOutboxValueEncoding(t *testing.T) {
	tests := []struct {
		name    string
		kind    OutboxKind
		key     []byte
		payload []byte
		headers map[string]string
	}{
		{"plain", OutboxOutput, []byte(`"u1"`), []byte(`{"n":1}`), nil},
		{"empty key and payload", OutboxOutput, nil, nil, nil},
		{"headers", OutboxDeadLetter, []byte(`42`), []byte(`{}`), map[string]string{"reason": "trap", "subject": "a.b", "": ""}},
		{"late", OutboxLate, []byte(`"k"`), bytes.Repeat([]byte("p"), 1000), map[string]string{"seq": "17"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := appendOutboxValue(nil, tc.kind, tc.key, tc.payload, tc.headers)
			var e OutboxEntry
			requireNoError(t, decodeOutboxValue(enc, &e))
			requireEqual(t, tc.kind, e.Kind)
			requireEqual(t, string(tc.key), string(e.Key))
			requireEqual(t, string(tc.payload), string(e.Payload))
			if len(tc.headers) == 0 {
				requireEqual(t, map[string]string(nil), e.Headers)
			} else {
				requireEqual(t, tc.headers, e.Headers)
			}
			// Deterministic: the same headers always encode the same way.
			requireEqual(t, enc, appendOutboxValue(nil, tc.kind, tc.key, tc.payload, tc.headers))
			// A cut before the payload must fail to decode (a cut inside
			// the payload is indistinguishable from a shorter payload).
			for i := 0; i < len(enc)-len(tc.payload); i++ {
				var e OutboxEntry
				if err := decodeOutboxValue(enc[:i], &e); err == nil {
					t.Fatalf("prefix of %d bytes decoded without error", i)
				}
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
