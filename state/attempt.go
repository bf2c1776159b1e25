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
	// Revision names the deployment's revision that attempted it (another revision's record
	// is not counted).
	Revision string
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
	v := binary.AppendUvarint(nil, uint64(len(a.Revision)))
	v = append(v, a.Revision...)
	v = binary.AppendUvarint(v, a.Batch)
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
	corrupt := fmt.Errorf("%w: attempt record", ErrCorrupt)
	l, n := binary.Uvarint(v)
	if n <= 0 || l > uint64(len(v)-n) {
		return Attempt{}, corrupt
	}
	a := Attempt{Revision: string(v[n : n+int(l)])}
	v = v[n+int(l):]
	b, n := binary.Uvarint(v)
	if n <= 0 {
		return Attempt{}, corrupt
	}
	s, m := binary.Uvarint(v[n:])
	if m <= 0 || s > 1<<30 {
		return Attempt{}, corrupt
	}
	a.Batch, a.Starts = b, int(s)
	if rest := v[n+m:]; len(rest) > 0 {
		a.Suspect = append([]byte(nil), rest...)
	}
	return a, nil
}

// DeleteAttempt deletes the attempt record, synced: a clean stop is no crash.
func (d *Deployment) DeleteAttempt() error {
	if err := d.lockWrite(); err != nil {
		return err
	}
	defer d.unlockWrite()
	key := sectionKey(nil, d.prefix, sectionAttempt)
	if err := d.s.write(func() error { return d.s.db.Delete(key, pebble.Sync) }); err != nil {
		return fmt.Errorf("state: deleting the attempt record (deployment %s): %w", d.name, err)
	}
	return nil
}

// ClearAttempt deletes the attempt record with the batch.
func (b *Batch) ClearAttempt() { b.clearAttempt = true }
