package state

import (
	"encoding/binary"
	"fmt"
)

// forked is the open transaction of a batch that has forks: its own key transactions, and
// everything else that ErrTxnOpen refuses, wait for Join.
var forked = &KeyTxn{done: true}

// Fork returns n batches for the key transactions of the chunks of one phase of group calls
// that run at once (ABI v2's guest calls on several instances; RATIONALE.md, "ABI v2: a
// phase's chunks run at once, each in a fork of the state batch"). Each fork starts with b's
// variable writes so far and reads through to the store as b does; its own writes (its key
// transactions, their Discard and RevertKeys) are its own until Join appends them to b's.
// Each fork may be used by a goroutine of its own, beside the other forks; the forks must
// write disjoint keys (a batch calls each key at most once per phase), as nothing orders
// their writes but Join. Until Join, b's own variable operations (Key, DeclareVars,
// ExpireTTL, ExpiredTimers, RevertKeys, Fork) and its Commit return ErrTxnOpen. A fork
// cannot Commit (ErrBatchDone); Join or Close ends it.
func (b *Batch) Fork(n int) ([]*Batch, error) {
	release, err := b.enter()
	if err != nil {
		return nil, err
	}
	defer release()
	forks := make([]*Batch, n)
	for i := range forks {
		f := &Batch{d: b.d, id: b.id, parent: b, vb: b.d.s.db.NewIndexedBatch()}
		f.ov.unsafe = b.ov.unsafe
		if !b.vb.Empty() {
			if err := f.vb.Apply(b.vb, nil); err != nil {
				for _, f := range forks[:i+1] {
					f.Close()
				}
				return nil, fmt.Errorf("state: fork batch %d: %w", b.id, err)
			}
		}
		f.seed = txnMark{len: len(f.vb.Repr()), count: f.vb.Count()}
		forks[i] = f
	}
	b.tx = forked
	return forks, nil
}

// Join ends the forks of b (Fork), which must be all of them, and appends their writes to
// b's, in the order given: the order of the groups they ran, so that b ends as it would had
// the groups run one after the other on b itself. The forks are closed, whatever Join
// returns. A fork made unusable (a failed rebuild after a revert) makes b unusable with its
// error. Transactions committed in b before the fork can no longer be reverted.
func (b *Batch) Join(forks ...*Batch) error {
	defer func() {
		for _, f := range forks {
			f.Close()
		}
	}()
	if b.tx != forked {
		return fmt.Errorf("%w: Join of a batch that has no forks", ErrVarOp)
	}
	b.tx = nil
	b.reverts++
	if b.err != nil {
		return b.err
	}
	for i, f := range forks {
		if f.parent != b {
			b.err = fmt.Errorf("%w: Join of a batch that is not a fork of this one", ErrVarOp)
			return b.err
		}
		if f.err != nil {
			b.err = fmt.Errorf("state: fork %d of batch %d: %w", i, b.id, f.err)
			return b.err
		}
		if f.tx != nil {
			b.err = fmt.Errorf("%w: Join of a fork whose transaction is open", ErrTxnOpen)
			return b.err
		}
		if i == 0 {
			// The first fork holds b's writes and its own, in that order: it becomes b's.
			_ = b.vb.Close()
			b.vb, f.vb = f.vb, nil
		} else if count := f.vb.Count() - f.seed.count; count > 0 {
			own := f.vb.Repr()[f.seed.len:]
			data := make([]byte, batchHeader, batchHeader+len(own))
			binary.LittleEndian.PutUint32(data[8:12], count)
			data = append(data, own...)
			tmp := b.d.s.db.NewBatch()
			err := tmp.SetRepr(data)
			if err == nil {
				err = b.vb.Apply(tmp, nil)
			}
			_ = tmp.Close()
			if err != nil {
				b.err = fmt.Errorf("state: join fork %d of batch %d: %w", i, b.id, err)
				return b.err
			}
		}
		if len(b.ov.m) == 0 {
			b.ov.m, f.ov.m = f.ov.m, nil // the fork's own writes are all there is
		} else {
			for k, e := range f.ov.m {
				b.ov.m[k] = e
			}
		}
		b.joinImages(f)
		b.ov.unsafe = b.ov.unsafe || f.ov.unsafe
		b.keysDelta += f.keysDelta
		b.timersDelta += f.timersDelta
	}
	return nil
}

// batchHeader is the size of a Pebble batch's header: a u64 sequence number, a u32 count.
const batchHeader = 12
