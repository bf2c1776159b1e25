package state

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// appendOutboxValueV1 is the outbox value encoder of format version 1, kept to build
// version-1 stores: kind, key, headers (sorted by name) and payload.
func appendOutboxValueV1(dst []byte, kind OutboxKind, key, payload []byte, headers map[string]string) []byte {
	dst = append(dst, byte(kind))
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.AppendUvarint(dst, uint64(len(headers)))
	names := make([]string, 0, len(headers))
	for n := range headers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := headers[n]
		dst = binary.AppendUvarint(dst, uint64(len(n)))
		dst = append(dst, n...)
		dst = binary.AppendUvarint(dst, uint64(len(v)))
		dst = append(dst, v...)
	}
	return append(dst, payload...)
}

func TestOutboxValueV1Decoding(t *testing.T) {
	tests := []struct {
		name    string
		kind    OutboxKind
		key     []byte
		payload []byte
		headers map[string]string
		want    OutboxEntry // ID, Kind, Key and Payload are filled in
	}{
		{"output", OutboxOutput, []byte(`"u1"`), []byte(`{"n":1}`), nil, OutboxEntry{}},
		{"empty", OutboxOutput, nil, nil, map[string]string{}, OutboxEntry{}},
		{"dead letter", OutboxDeadLetter, []byte(`42`), []byte(`{`), map[string]string{
			v1HeaderReason: "invalid_json", v1HeaderError: "unexpected end of JSON input",
			v1HeaderSubject: "in.logins", v1HeaderSequence: "18446744073709551615",
		}, OutboxEntry{Reason: "invalid_json", Error: "unexpected end of JSON input", Subject: "in.logins", Sequence: 1<<64 - 1}},
		{"late without subject", OutboxLate, []byte(`"k"`), []byte(`{}`), map[string]string{
			v1HeaderReason: "late", v1HeaderError: "event time 5 is before the watermark 9",
		}, OutboxEntry{Reason: "late", Error: "event time 5 is before the watermark 9"}},
		{"timeout call", OutboxDeadLetter, []byte(`"k"`), nil, map[string]string{
			v1HeaderReason: "handler_error", v1HeaderError: "trap", v1HeaderTimeoutCall: "true",
		}, OutboxEntry{Reason: "handler_error", Error: "trap", TimeoutCall: true}},
		{"timeout call not true", OutboxDeadLetter, nil, nil, map[string]string{v1HeaderTimeoutCall: "1"}, OutboxEntry{}},
		{"unknown headers ignored", OutboxDeadLetter, nil, []byte("p"), map[string]string{
			"reason": "x", "Groupstate-Deployment": "d", "": "", v1HeaderSequence: "0", v1HeaderSubject: "a.b",
		}, OutboxEntry{Subject: "a.b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := appendOutboxValueV1(nil, tc.kind, tc.key, tc.payload, tc.headers)
			got := OutboxEntry{ID: OutboxID{1, 2}}
			requireNoError(t, decodeOutboxValueV1(enc, &got))
			want := tc.want
			want.ID, want.Kind, want.Key, want.Payload = OutboxID{1, 2}, tc.kind, tc.key, tc.payload
			requireEqual(t, normOutbox(want), normOutbox(got))
			for i := 0; i < len(enc)-len(tc.payload); i++ {
				e := OutboxEntry{ID: OutboxID{1, 2}}
				requireErrorIs(t, decodeOutboxValueV1(enc[:i], &e), ErrCorrupt)
			}
		})
	}
	t.Run("bad sequence", func(t *testing.T) {
		for _, seq := range []string{"", "x", "-1", "18446744073709551616", " 1"} {
			enc := appendOutboxValueV1(nil, OutboxLate, nil, nil, map[string]string{v1HeaderSequence: seq})
			var e OutboxEntry
			requireErrorIs(t, decodeOutboxValueV1(enc, &e), ErrCorrupt)
		}
	})
}

// v1Outbox is an outbox entry of a hand-built version-1 store.
type v1Outbox struct {
	id      OutboxID
	kind    OutboxKind
	key     string
	payload string
	headers map[string]string
}

// v1Deployment is the content of one deployment of a hand-built version-1 store.
type v1Deployment struct {
	entries  map[string]Entry
	progress *Progress
	outbox   []v1Outbox
}

// buildV1Store writes a format-version-1 store into dir on fs with Pebble directly: the
// "\x00format" key with version 1, the store id, and for each deployment its state entries,
// timer keys, progress record and outbox values in the version-1 encoding.
func buildV1Store(t *testing.T, fs vfs.FS, dir string, deps map[string]v1Deployment) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{FS: fs, FormatMajorVersion: pebbleFormat, Logger: pebbleLogger{quietLogger()}})
	requireNoError(t, err)
	b := db.NewBatch()
	requireNoError(t, b.Set(formatKey, formatValue(1), nil))
	requireNoError(t, b.Set(idKey, []byte("0123456789abcdef"), nil))
	for name, dep := range deps {
		p := deploymentPrefix(name)
		for k, e := range dep.entries {
			requireNoError(t, b.Set(valueKey(nil, p, []byte(k)), appendEntry(nil, e), nil))
			if e.TimeoutMs != 0 {
				requireNoError(t, b.Set(timerKey(nil, p, e.TimeoutMs, []byte(k)), nil, nil))
			}
		}
		if dep.progress != nil {
			requireNoError(t, b.Set(sectionKey(nil, p, sectionProgress), appendProgress(nil, *dep.progress), nil))
		}
		for _, o := range dep.outbox {
			v := appendOutboxValueV1(nil, o.kind, []byte(o.key), []byte(o.payload), o.headers)
			requireNoError(t, b.Set(outboxKey(nil, p, o.id), v, nil))
		}
	}
	requireNoError(t, b.Commit(pebble.Sync))
	requireNoError(t, db.Close())
}

// readFormat returns the store's format version as recorded on disk.
func readFormat(t *testing.T, s *Store) uint32 {
	t.Helper()
	v, found, err := s.readValue(formatKey)
	requireNoError(t, err)
	if !found || len(v) != 4 {
		t.Fatalf("format key %q (found %v)", v, found)
	}
	return binary.BigEndian.Uint32(v)
}

// outboxOf collects d's outbox.
func outboxOf(t *testing.T, d *Deployment) []OutboxEntry {
	t.Helper()
	var got []OutboxEntry
	requireNoError(t, d.Outbox(func(e OutboxEntry) error { got = append(got, normOutbox(e)); return nil }))
	return got
}

// v1Fixture is a version-1 store with three deployments: two with outbox entries of every
// kind and one without any.
func v1Fixture() (deps map[string]v1Deployment, want map[string][]OutboxEntry) {
	deps = map[string]v1Deployment{
		"a": {
			entries:  map[string]Entry{`"u1"`: valT(`{"n":1}`, 100), `"u2"`: val(`{"n":2}`)},
			progress: &Progress{BatchID: 4, WatermarkMs: 90, Position: 12, Keys: 2, TimerKeys: 1},
			outbox: []v1Outbox{
				{OutboxID{3, 0}, OutboxOutput, `"u1"`, `{"user":"u1","n":1}`, nil},
				{OutboxID{3, 1}, OutboxDeadLetter, `"u2"`, `{"user":`, map[string]string{
					v1HeaderReason: "invalid_json", v1HeaderError: "unexpected end of JSON input",
					v1HeaderSubject: "in.logins", v1HeaderSequence: "11",
				}},
				{OutboxID{4, 0}, OutboxLate, `"u1"`, `{"t":5}`, map[string]string{
					v1HeaderReason: "late", v1HeaderError: "too late", v1HeaderSubject: "in.logins", v1HeaderSequence: "12",
					"X-Unknown": "dropped",
				}},
				{OutboxID{4, 1}, OutboxDeadLetter, `"u3"`, ``, map[string]string{
					v1HeaderReason: "handler_error", v1HeaderError: "trap", v1HeaderTimeoutCall: "true",
				}},
			},
		},
		"ab": {
			progress: &Progress{BatchID: 1},
			outbox:   []v1Outbox{{OutboxID{1, 0}, OutboxOutput, ``, `{}`, map[string]string{}}},
		},
		"b": {
			entries:  map[string]Entry{"k": {TimeoutMs: 5}},
			progress: &Progress{BatchID: 9, TimerKeys: 1},
		},
	}
	want = map[string][]OutboxEntry{
		"a": {
			{ID: OutboxID{3, 0}, Kind: OutboxOutput, Key: []byte(`"u1"`), Payload: []byte(`{"user":"u1","n":1}`)},
			{ID: OutboxID{3, 1}, Kind: OutboxDeadLetter, Key: []byte(`"u2"`), Payload: []byte(`{"user":`),
				Reason: "invalid_json", Error: "unexpected end of JSON input", Subject: "in.logins", Sequence: 11},
			{ID: OutboxID{4, 0}, Kind: OutboxLate, Key: []byte(`"u1"`), Payload: []byte(`{"t":5}`),
				Reason: "late", Error: "too late", Subject: "in.logins", Sequence: 12},
			{ID: OutboxID{4, 1}, Kind: OutboxDeadLetter, Key: []byte(`"u3"`),
				Reason: "handler_error", Error: "trap", TimeoutCall: true},
		},
		"ab": {{ID: OutboxID{1, 0}, Kind: OutboxOutput, Payload: []byte(`{}`)}},
		"b":  nil,
	}
	return deps, want
}

// TestMigrateV1 opens a hand-built version-1 store: Open rewrites the outbox entries as typed
// entries and records FormatVersion; state, timers, progress and the store id are untouched.
// Without the migration Open refuses the store (ErrFormatVersion), or, accepting version 1
// without rewriting, Outbox fails to decode (or misreads) the old values.
func TestMigrateV1(t *testing.T) {
	fs := vfs.NewMem()
	deps, want := v1Fixture()
	buildV1Store(t, fs, "db", deps)

	check := func(s *Store) {
		t.Helper()
		requireEqual(t, FormatVersion, readFormat(t, s))
		requireEqual(t, "0123456789abcdef", s.ID())
		names, err := s.Deployments()
		requireNoError(t, err)
		requireEqual(t, []string{"a", "ab", "b"}, names)
		for name, w := range want {
			d := s.Deployment(name)
			requireEqual(t, w, outboxOf(t, d), "outbox of %s", name)
			p, err := d.Progress()
			requireNoError(t, err)
			requireEqual(t, *deps[name].progress, p, "progress of %s", name)
			entries := deps[name].entries
			if entries == nil {
				entries = map[string]Entry{}
			}
			requireEqual(t, entries, allKeys(t, d), "state of %s", name)
		}
		requireEqual(t, []timer{{`"u1"`, 100}}, expired(t, s.Deployment("a"), 1000))
		requireEqual(t, []timer{{"k", 5}}, expired(t, s.Deployment("b"), 1000))
	}
	s, err := Open("db", &Options{FS: fs, Logger: quietLogger()})
	requireNoError(t, err)
	check(s)

	// The migrated store works: acknowledge, append, commit.
	a := s.Deployment("a")
	requireNoError(t, a.AckOutbox(OutboxID{3, 1}))
	b := a.NewBatch(5)
	b.AppendOutbox(&OutboxEntry{Kind: OutboxLate, Key: []byte(`"u2"`), Reason: "late", Sequence: 13})
	requireNoError(t, commitErr(b))
	wantA := append(want["a"][2:4:4], OutboxEntry{ID: OutboxID{5, 0}, Kind: OutboxLate, Key: []byte(`"u2"`), Reason: "late", Sequence: 13})
	requireEqual(t, wantA, outboxOf(t, a))
	requireNoError(t, s.Close())

	// Reopened, read-write (no second migration) and read-only, it reads the same.
	for _, ro := range []bool{false, true} {
		s, err := Open("db", &Options{FS: fs, Logger: quietLogger(), ReadOnly: ro})
		requireNoError(t, err)
		requireEqual(t, FormatVersion, readFormat(t, s))
		requireEqual(t, wantA, outboxOf(t, s.Deployment("a")), "read-only %v", ro)
		requireEqual(t, want["ab"], outboxOf(t, s.Deployment("ab")), "read-only %v", ro)
		requireNoError(t, s.Close())
	}
}

// TestMigrateV1Refusals: a version-1 store opened read-only, or with an outbox value that
// does not decode, is refused and left as it was, still version 1; opened read-write
// afterwards (once fixed) it migrates.
func TestMigrateV1Refusals(t *testing.T) {
	t.Run("read-only", func(t *testing.T) {
		fs := vfs.NewMem()
		deps, want := v1Fixture()
		buildV1Store(t, fs, "db", deps)
		_, err := Open("db", &Options{FS: fs, Logger: quietLogger(), ReadOnly: true})
		requireErrorIs(t, err, ErrFormatVersion)
		if !strings.Contains(err.Error(), "without ReadOnly") {
			t.Fatalf("error %q does not say how to migrate", err)
		}
		s, err := Open("db", &Options{FS: fs, Logger: quietLogger()})
		requireNoError(t, err)
		defer s.Close()
		requireEqual(t, want["a"], outboxOf(t, s.Deployment("a")))
	})
	tests := []struct {
		name  string
		key   func(p []byte) []byte // outbox key of the bad record
		value []byte
	}{
		{"truncated value", func(p []byte) []byte { return outboxKey(nil, p, OutboxID{9, 0}) }, []byte{byte(OutboxOutput), 5, 'a'}},
		{"bad sequence header", func(p []byte) []byte { return outboxKey(nil, p, OutboxID{9, 0}) },
			appendOutboxValueV1(nil, OutboxLate, nil, nil, map[string]string{v1HeaderSequence: "twelve"})},
		{"short outbox key", func(p []byte) []byte { return append(sectionKey(nil, p, sectionOutbox), 1, 2, 3) }, appendOutboxValueV1(nil, OutboxOutput, nil, nil, nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			deps, _ := v1Fixture()
			buildV1Store(t, fs, "db", deps)
			db, err := pebble.Open("db", &pebble.Options{FS: fs, FormatMajorVersion: pebbleFormat, Logger: pebbleLogger{quietLogger()}})
			requireNoError(t, err)
			bad := tc.key(deploymentPrefix("ab"))
			requireNoError(t, db.Set(bad, tc.value, pebble.Sync))
			requireNoError(t, db.Close())

			_, err = Open("db", &Options{FS: fs, Logger: quietLogger()})
			requireErrorIs(t, err, ErrCorrupt)

			// Nothing was written: the format is 1 and the values are the old ones.
			db, err = pebble.Open("db", &pebble.Options{FS: fs, FormatMajorVersion: pebbleFormat, Logger: pebbleLogger{quietLogger()}})
			requireNoError(t, err)
			v, closer, err := db.Get(formatKey)
			requireNoError(t, err)
			requireEqual(t, formatValue(1), append([]byte(nil), v...))
			requireNoError(t, closer.Close())
			o := deps["a"].outbox[1]
			v, closer, err = db.Get(outboxKey(nil, deploymentPrefix("a"), o.id))
			requireNoError(t, err)
			requireEqual(t, appendOutboxValueV1(nil, o.kind, []byte(o.key), []byte(o.payload), o.headers), append([]byte(nil), v...))
			requireNoError(t, closer.Close())
			requireNoError(t, db.Delete(bad, pebble.Sync))
			requireNoError(t, db.Close())

			s, err := Open("db", &Options{FS: fs, Logger: quietLogger()})
			requireNoError(t, err)
			defer s.Close()
			requireEqual(t, FormatVersion, readFormat(t, s))
		})
	}
}

// TestFormatVersionsRefused: versions other than 1 and FormatVersion are refused, and the
// store is left alone.
func TestFormatVersionsRefused(t *testing.T) {
	for _, v := range []uint32{0, FormatVersion + 1, 1 << 31} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			fs := vfs.NewMem()
			deps, _ := v1Fixture()
			buildV1Store(t, fs, "db", deps)
			db, err := pebble.Open("db", &pebble.Options{FS: fs, FormatMajorVersion: pebbleFormat, Logger: pebbleLogger{quietLogger()}})
			requireNoError(t, err)
			requireNoError(t, db.Set(formatKey, formatValue(v), pebble.Sync))
			requireNoError(t, db.Close())
			for _, ro := range []bool{false, true} {
				_, err := Open("db", &Options{FS: fs, Logger: quietLogger(), ReadOnly: ro})
				requireErrorIs(t, err, ErrFormatVersion)
			}
			db, err = pebble.Open("db", &pebble.Options{FS: fs, FormatMajorVersion: pebbleFormat, Logger: pebbleLogger{quietLogger()}, ReadOnly: true})
			requireNoError(t, err)
			defer db.Close()
			got, closer, err := db.Get(formatKey)
			requireNoError(t, err)
			defer closer.Close()
			requireEqual(t, formatValue(v), append([]byte(nil), got...))
		})
	}
}
