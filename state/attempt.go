package state

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// sectionAttempt holds a deployment's attempt record (Deployment.RecordAttempt).
const sectionAttempt = 'a'

// Attempt records, outside any batch, that a batch is being attempted: an engine records
// one when it opens, and again before each key it runs alone, so that after a crash that no
// error could report (the process killed for its memory, a native fault, a freeze ended by
// kill -9) the next engine knows how often that batch was started without committing, and
// which key was running. The next commit clears it (Batch.ClearAttempt).
type Attempt struct {
	// Batch is the id of the batch attempted.
	Batch uint64
	// Starts counts the engines that opened with that batch next and did not commit it.
	Starts int
	// Suspect is the key that was running alone when the record was written (nil: none).
	Suspect []byte
}

// RecordAttempt writes a, synced, replacing the record before it.
func (d *Deployment) RecordAttempt(a Attempt) error {
	if err := d.lockWrite(); err != nil {
		return err
	}
	defer d.unlockWrite()
	v := binary.AppendUvarint(nil, a.Batch)
	v = binary.AppendUvarint(v, uint64(a.Starts))
	v = append(v, a.Suspect...)
	key := sectionKey(nil, d.prefix, sectionAttempt)
	if err := d.s.write(func() error { return d.s.db.Set(key, v, pebble.Sync) }); err != nil {
		return fmt.Errorf("state: recording an attempt of batch %d (deployment %s): %w", a.Batch, d.name, err)
	}
	return nil
}

// Attempt returns the attempt record (the zero Attempt when there is none).
func (d *Deployment) Attempt() (Attempt, error) {
	if err := d.acquire(); err != nil {
		return Attempt{}, err
	}
	defer d.s.release()
	v, found, err := d.s.readValue(sectionKey(nil, d.prefix, sectionAttempt))
	if err != nil || !found {
		return Attempt{}, err
	}
	b, n := binary.Uvarint(v)
	if n <= 0 {
		return Attempt{}, fmt.Errorf("%w: attempt record", ErrCorrupt)
	}
	s, m := binary.Uvarint(v[n:])
	if m <= 0 || s > 1<<30 {
		return Attempt{}, fmt.Errorf("%w: attempt record", ErrCorrupt)
	}
	a := Attempt{Batch: b, Starts: int(s)}
	if rest := v[n+m:]; len(rest) > 0 {
		a.Suspect = append([]byte(nil), rest...)
	}
	return a, nil
}

// ClearAttempt deletes the attempt record with the batch.
func (b *Batch) ClearAttempt() { b.clearAttempt = true }
