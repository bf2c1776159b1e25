package replay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// published holds the outputs deployments published, as read from their output streams, on
// disk (a Pebble store in a temporary directory), so that a replay over millions of keys or
// outputs holds in memory the outputs of one compared batch at a time (see [published.of]),
// not all of them. Its keys are:
//
//	side, u32 partition, u64 batch, u64 n   the n-th output read (uvarint key length, key, row)
//	'm', side, message id                   a message id read (its duplicates are skipped)
//
// where side tells the deployment apart ([Diff] reads two).
type published struct {
	db  *pebble.DB
	dir string
	wb  *pebble.Batch // writes not yet applied: every read of the outputs follows flush
	n   uint64
	buf []byte
}

// Sides of [published].
const (
	sideOld byte = 'o' // the deployment's (for a Diff, the primary's)
	sideNew byte = 'n' // a Diff's shadow's
)

// publishedFlushBytes is how many bytes of writes published buffers before applying them.
const publishedFlushBytes = 4 << 20

// openPublished opens an empty store of published outputs in a new temporary directory.
func openPublished() (*published, error) {
	dir, err := os.MkdirTemp("", "groupstate-published-")
	if err != nil {
		return nil, err
	}
	cache := pebble.NewCache(8 << 20)
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{Cache: cache, MemTableSize: 8 << 20, DisableWAL: true, Logger: quietPebble{}})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("replay: opening a store for the published outputs: %w", err)
	}
	return &published{db: db, dir: dir, wb: db.NewIndexedBatch()}, nil
}

// close closes the store and removes its directory.
func (s *published) close() {
	_ = s.wb.Close()
	_ = s.db.Close()
	_ = os.RemoveAll(s.dir)
}

// outputKey appends the key of side's partition part's batch to dst.
func outputKey(dst []byte, side byte, part int, batch uint64) []byte {
	dst = append(dst, side)
	dst = binary.BigEndian.AppendUint32(dst, uint32(part))
	return binary.BigEndian.AppendUint64(dst, batch)
}

// add records an output of side's partition part, published by batch for key, after those
// added before it.
func (s *published) add(side byte, part int, batch uint64, key string, row []byte) error {
	s.n++
	k := binary.BigEndian.AppendUint64(outputKey(nil, side, part, batch), s.n)
	v := binary.AppendUvarint(s.buf[:0], uint64(len(key)))
	v = append(append(v, key...), row...)
	s.buf = v
	if err := s.wb.Set(k, v, nil); err != nil {
		return err
	}
	return s.maybeFlush()
}

// firstSeen reports whether side's message id id was not seen before, and records it.
func (s *published) firstSeen(side byte, id string) (bool, error) {
	k := append([]byte{'m', side}, id...)
	_, closer, err := s.wb.Get(k) // the batch reads through to the store
	switch {
	case err == nil:
		return false, closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return false, err
	}
	if err := s.wb.Set(k, nil, nil); err != nil {
		return false, err
	}
	return true, s.maybeFlush()
}

// maybeFlush applies the buffered writes once they are many.
func (s *published) maybeFlush() error {
	if s.wb.Len() < publishedFlushBytes {
		return nil
	}
	return s.flush()
}

// flush applies the buffered writes to the store.
func (s *published) flush() error {
	if s.wb.Empty() {
		return nil
	}
	if err := s.wb.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("replay: storing published outputs: %w", err)
	}
	_ = s.wb.Close()
	s.wb = s.db.NewIndexedBatch()
	return nil
}

// of returns side's outputs of partition part's batches ids (a batch's chunks), by key, in
// the order of ids and, within a batch, in the order they were read.
func (s *published) of(side byte, part int, ids []uint64) (map[string][][]byte, error) {
	if err := s.flush(); err != nil {
		return nil, err
	}
	byKey := map[string][][]byte{}
	for _, id := range ids {
		lower := outputKey(nil, side, part, id)
		iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: outputKey(nil, side, part, id+1)})
		if err != nil {
			return nil, err
		}
		for ok := iter.First(); ok; ok = iter.Next() {
			v := iter.Value()
			n, w := binary.Uvarint(v)
			if w <= 0 || n > uint64(len(v)-w) {
				_ = iter.Close()
				return nil, fmt.Errorf("replay: a stored output of batch %d is malformed", id)
			}
			key := string(v[w : w+int(n)])
			byKey[key] = append(byKey[key], slices.Clone(v[w+int(n):]))
		}
		if err := iter.Close(); err != nil {
			return nil, err
		}
	}
	return byKey, nil
}

// quietPebble discards Pebble's logs (the store is a scratch space) but for a fatal error.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("replay: published outputs store: "+format, args...))
}
