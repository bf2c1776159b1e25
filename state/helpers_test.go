package state

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A tiny require helper, in the manner of wazero's internal/testing/require.

func requireNoError(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func requireErrorIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v is not %v", err, target)
	}
}

func requireEqual(t testing.TB, want, got any, msgAndArgs ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		msg := ""
		if len(msgAndArgs) > 0 {
			msg = fmt.Sprintf(msgAndArgs[0].(string), msgAndArgs[1:]...) + ": "
		}
		t.Fatalf("%snot equal:\nwant: %#v\ngot:  %#v", msg, want, got)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openMem opens a store on a fresh in-memory filesystem.
func openMem(t testing.TB) *Store {
	t.Helper()
	s, err := Open("db", &Options{FS: vfs.NewMem(), Logger: quietLogger(), CacheSize: 1 << 20, MemTableSize: 1 << 20})
	requireNoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openDisk opens a store in dir on the real filesystem.
func openDisk(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, &Options{Logger: quietLogger(), CacheSize: 1 << 20, MemTableSize: 1 << 20})
	requireNoError(t, err)
	return s
}

// rawKeys returns every key (after the deployment prefix) of d, in order.
func rawKeys(t testing.TB, d *Deployment) []string {
	t.Helper()
	iter, err := d.s.db.NewIter(&pebble.IterOptions{LowerBound: d.prefix, UpperBound: prefixEnd(d.prefix)})
	requireNoError(t, err)
	defer iter.Close()
	var keys []string
	for ok := iter.First(); ok; ok = iter.Next() {
		keys = append(keys, string(iter.Key()[len(d.prefix):]))
	}
	requireNoError(t, iter.Error())
	return keys
}

type timer struct {
	Key string
	Ts  int64
}

// expired collects Expired(before).
func expired(t testing.TB, d *Deployment, before int64) []timer {
	t.Helper()
	var got []timer
	requireNoError(t, d.Expired(before, func(key []byte, ts int64) error {
		got = append(got, timer{string(key), ts})
		return nil
	}))
	return got
}

// allKeys collects Keys(nil, 0) as key -> entry (values copied).
func allKeys(t testing.TB, d *Deployment) map[string]Entry {
	t.Helper()
	got := map[string]Entry{}
	requireNoError(t, d.Keys(nil, 0, func(key []byte, e Entry) error {
		if e.HasValue {
			e.Value = append([]byte{}, e.Value...)
		}
		got[string(key)] = e
		return nil
	}))
	return got
}

func val(s string) Entry { return Entry{Value: []byte(s), HasValue: true} }

func valT(s string, ts int64) Entry { return Entry{Value: []byte(s), HasValue: true, TimeoutMs: ts} }

// commit writes one batch of sets (prev read with Get) and fails the test on
// error.
func commit(t testing.TB, d *Deployment, id uint64, sets map[string]Entry) {
	t.Helper()
	b := d.NewBatch(id)
	defer b.Close()
	for k, next := range sets {
		prev, _, err := d.Get([]byte(k))
		requireNoError(t, err)
		b.Set([]byte(k), prev, next)
	}
	requireNoError(t, commitErr(b))
}

// commitErr commits b and returns Commit's error, checking on the way that a failed Commit
// returns the zero Progress (the error then says otherwise, still wrapping Commit's).
func commitErr(b *Batch) error {
	p, err := b.Commit()
	if err != nil && p != (Progress{}) {
		return fmt.Errorf("Commit returned %+v with error %w", p, err)
	}
	return err
}
