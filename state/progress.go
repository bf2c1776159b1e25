package state

import (
	"encoding/binary"
	"fmt"
)

// Progress is a deployment's committed progress, written by every
// Batch.Commit. It is comparable with ==.
type Progress struct {
	// BatchID is the id of the last committed batch; 0 means none yet.
	BatchID uint64
	// WatermarkMs is the event-time watermark after that batch. While a
	// batch is open (Open.Active), it is the watermark that batch runs at.
	WatermarkMs int64
	// Position is the input position included (for example the last
	// JetStream stream sequence).
	Position uint64
	// Keys is the number of keys with a state value, maintained by
	// Batch.Set; for an ABI v2 deployment, the number of keys with a
	// variable holding items or a timer (see Deployment.VarKeys),
	// maintained by the batch's KeyTxns, ExpireTTL and DeclareVars.
	Keys int64
	// TimerKeys is the number of keys with a timeout, maintained by
	// Batch.Set; for an ABI v2 deployment, the number of keys with at
	// least one timer.
	TimerKeys int64
	// Open is the micro-batch in progress, when one is committed in several
	// chunks and chunks are left (see OpenBatch); zero otherwise.
	Open OpenBatch
	// Generation counts the times the deployment's input was rewound behind
	// batches it may already have published (as after a data directory was
	// restored from a backup): batch ids repeat then, so output message ids
	// include the generation to stay unique. 0 until the first such rewind.
	// Batch.SetGeneration sets it; every other commit carries it over.
	Generation uint64
	// GenerationFrom is the id of the batch that started Generation: outbox
	// entries of earlier batches belong to the generation before.
	GenerationFrom uint64
	// InputCreated identifies the input stream Position counts in: its
	// creation time in Unix nanoseconds (0: unknown). A stream deleted and
	// re-created numbers its messages from 1 again, and its creation time
	// tells. Batch.SetInputCreated sets it; every other commit carries it over.
	InputCreated int64
	// MaxEventMs is the largest event time of any row the deployment has seen,
	// late rows included, when HasMaxEvent is set. Only a partition of a
	// deployment split into partitions records it (its watermark depends on
	// the other partitions' maxima, so its own must survive restarts and
	// failovers; see docs/semantics.md, "Event time across partitions").
	// Batch.SetMaxEvent sets it; every other commit carries it over.
	MaxEventMs int64
	// HasMaxEvent tells whether MaxEventMs was recorded.
	HasMaxEvent bool
	// ProcessingTimeMs is the processing time of the last committed batch (0: none
	// recorded, as in a record written before it was kept). A batch never runs at an
	// earlier one, whatever the wall clock says (docs/semantics.md, "A micro-batch").
	// Batch.SetProcessingTime sets it; every other commit carries it over, and a commit
	// never lowers it.
	ProcessingTimeMs int64
	// Counters are the deployment's running totals, committed with the batches they count,
	// so they survive restarts and failovers. Batch.AddCounters adds to them; every other
	// commit carries them over.
	Counters Counters
}

// Counters are a deployment's running totals since its state began (a Drop, as by a reset of
// the state, starts them again at 0). It is comparable with ==.
type Counters struct {
	// Batches counts the committed micro-batches (a batch committed in chunks once).
	Batches uint64
	// RowsIn counts input rows, LateRows those dropped as late, DeadLetters the dead
	// letters, TimeoutsFired the timeout (timer) calls, Emitted the rows emitted and
	// TTLExpired the state variable entries removed by their TTL.
	RowsIn, LateRows, DeadLetters, TimeoutsFired, Emitted, TTLExpired uint64
}

// add returns c plus d.
func (c Counters) add(d Counters) Counters {
	return Counters{Batches: c.Batches + d.Batches, RowsIn: c.RowsIn + d.RowsIn, LateRows: c.LateRows + d.LateRows,
		DeadLetters: c.DeadLetters + d.DeadLetters, TimeoutsFired: c.TimeoutsFired + d.TimeoutsFired,
		Emitted: c.Emitted + d.Emitted, TTLExpired: c.TTLExpired + d.TTLExpired}
}

// fields lists the counters in the order version 5's extra fields hold them.
func (c *Counters) fields() [7]*uint64 {
	return [7]*uint64{&c.Batches, &c.RowsIn, &c.LateRows, &c.DeadLetters, &c.TimeoutsFired, &c.Emitted, &c.TTLExpired}
}

// OpenBatch is a micro-batch that commits in chunks (as when more timeouts
// expire than one commit may carry), of which the last is not committed
// yet: a batch after a crash between its chunks goes on from here, with the
// same processing time and watermark. Batch.SetOpen records it; a commit
// without SetOpen closes it.
type OpenBatch struct {
	// Active is set while a batch is open; the other fields are zero
	// otherwise.
	Active bool
	// ProcessingTimeMs is the batch's processing time.
	ProcessingTimeMs int64
	// NextWatermarkMs is the watermark to commit when the batch closes
	// (Progress.WatermarkMs is the one it runs at until then).
	NextWatermarkMs int64
	// Next is where in the timer index the batch's remaining timeouts start:
	// the timers before it were handled by its committed chunks.
	Next TimerPos
}

// TimerPos is a position in a deployment's timer index, which is ordered by
// timeout and then by key bytes. A TimerPos{TimeoutMs: math.MinInt64} is
// before every timer.
type TimerPos struct {
	TimeoutMs int64
	Key       string
}

// TimerAfter returns the position right after the timer of key at
// timeoutMs: that of key + "\x00", the smallest key after key.
func TimerAfter(timeoutMs int64, key []byte) TimerPos {
	return TimerPos{TimeoutMs: timeoutMs, Key: string(append(key[:len(key):len(key)], 0))}
}

// The progress record is version 1 without an open batch (as written before
// open batches existed, so an older runtime still reads it) and version 2
// with one: version 1's fields, then the open batch. Version 3, written only
// once Generation or InputCreated is set, is version 1's fields, Generation,
// GenerationFrom, InputCreated, a byte 0 or 1 telling whether an open batch
// follows, then version 2's open batch part. Version 4, written only once
// HasMaxEvent is set, is version 3 with MaxEventMs before the byte that tells
// whether an open batch follows: a record without it keeps its older
// encoding, byte for byte. Version 5, written only once ProcessingTimeMs or
// a counter is set, is version 4 with the byte telling whether MaxEventMs is
// recorded, ProcessingTimeMs, and a list of extra fields (a uvarint count,
// then that many uvarints: the Counters, none when all are 0; a reader takes
// those it knows and skips the rest) before the byte that tells whether an
// open batch follows.
const (
	progressVersion1 = 1
	progressVersion2 = 2
	progressVersion3 = 3
	progressVersion4 = 4
	progressVersion5 = 5
	progressLen      = 1 + 8*5 // version 1
	progressOpenLen  = 8 * 3   // the fixed part version 2 adds; the key follows
	progressGenLen   = 8*3 + 1 // what version 3 adds before the open batch part
	progressMaxLen   = 8       // what version 4 adds to version 3's part
)

func appendProgress(dst []byte, p Progress) []byte {
	v := byte(progressVersion1)
	switch {
	case p.ProcessingTimeMs != 0 || p.Counters != (Counters{}):
		v = progressVersion5
	case p.HasMaxEvent:
		v = progressVersion4
	case p.Generation > 0 || p.InputCreated != 0:
		v = progressVersion3
	case p.Open.Active:
		v = progressVersion2
	}
	dst = append(dst, v)
	dst = binary.BigEndian.AppendUint64(dst, p.BatchID)
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.WatermarkMs))
	dst = binary.BigEndian.AppendUint64(dst, p.Position)
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.Keys))
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.TimerKeys))
	if v >= progressVersion3 {
		dst = binary.BigEndian.AppendUint64(dst, p.Generation)
		dst = binary.BigEndian.AppendUint64(dst, p.GenerationFrom)
		dst = binary.BigEndian.AppendUint64(dst, uint64(p.InputCreated))
		if v >= progressVersion4 {
			dst = binary.BigEndian.AppendUint64(dst, uint64(p.MaxEventMs))
		}
		if v == progressVersion5 {
			dst = append(dst, byte(b2i(p.HasMaxEvent)))
			dst = binary.BigEndian.AppendUint64(dst, uint64(p.ProcessingTimeMs))
			dst = appendProgressExtra(dst, p)
		}
		dst = append(dst, byte(b2i(p.Open.Active)))
	}
	if !p.Open.Active {
		return dst
	}
	o := p.Open
	dst = binary.BigEndian.AppendUint64(dst, uint64(o.ProcessingTimeMs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(o.NextWatermarkMs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(o.Next.TimeoutMs))
	dst = binary.AppendUvarint(dst, uint64(len(o.Next.Key)))
	return append(dst, o.Next.Key...)
}

func decodeProgress(b []byte) (Progress, error) {
	corrupt := fmt.Errorf("%w: progress record of %d bytes", ErrCorrupt, len(b))
	if len(b) < progressLen || b[0] < progressVersion1 || b[0] > progressVersion5 ||
		(b[0] == progressVersion1 && len(b) != progressLen) {
		return Progress{}, corrupt
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(b[1+8*i:]) }
	p := Progress{
		BatchID:     u(0),
		WatermarkMs: int64(u(1)),
		Position:    u(2),
		Keys:        int64(u(3)),
		TimerKeys:   int64(u(4)),
	}
	if b[0] == progressVersion1 {
		return p, nil
	}
	off := progressLen // where the open batch part starts
	if b[0] >= progressVersion3 {
		off += progressGenLen
		if b[0] >= progressVersion4 {
			off += progressMaxLen
		}
		if b[0] == progressVersion5 {
			// The byte telling whether MaxEventMs is recorded, ProcessingTimeMs, the extra
			// fields; then the open batch byte.
			at := off - 1
			if len(b) < at+1+8 || b[at] > 1 {
				return Progress{}, corrupt
			}
			p.HasMaxEvent = b[at] == 1
			p.ProcessingTimeMs = int64(binary.BigEndian.Uint64(b[at+1:]))
			n, ok := decodeProgressExtra(b[at+9:], &p)
			if !ok {
				return Progress{}, corrupt
			}
			off = at + 9 + n + 1
		}
		if len(b) < off || b[off-1] > 1 {
			return Progress{}, corrupt
		}
		p.Generation, p.GenerationFrom, p.InputCreated = u(5), u(6), int64(u(7))
		if b[0] == progressVersion4 {
			p.MaxEventMs, p.HasMaxEvent = int64(u(8)), true
		} else if b[0] == progressVersion5 && p.HasMaxEvent {
			p.MaxEventMs = int64(u(8))
		}
		if b[off-1] == 0 {
			if len(b) != off {
				return Progress{}, corrupt
			}
			return p, nil
		}
	}
	if len(b) < off+progressOpenLen {
		return Progress{}, corrupt
	}
	o := func(i int) uint64 { return binary.BigEndian.Uint64(b[off+8*i:]) }
	p.Open = OpenBatch{Active: true, ProcessingTimeMs: int64(o(0)), NextWatermarkMs: int64(o(1))}
	p.Open.Next.TimeoutMs = int64(o(2))
	rest := b[off+progressOpenLen:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || n != uint64(len(rest)-w) {
		return Progress{}, corrupt
	}
	p.Open.Next.Key = string(rest[w:])
	return p, nil
}

// appendProgressExtra appends version 5's list of extra fields: its count, then each as a
// uvarint: the counters (none when all are 0). A later version of the record adds fields
// after them, which this reader skips.
func appendProgressExtra(dst []byte, p Progress) []byte {
	if p.Counters == (Counters{}) {
		return binary.AppendUvarint(dst, 0)
	}
	f := p.Counters.fields()
	dst = binary.AppendUvarint(dst, uint64(len(f)))
	for _, v := range f {
		dst = binary.AppendUvarint(dst, *v)
	}
	return dst
}

// decodeProgressExtra reads version 5's list of extra fields at the start of b into p and
// returns its length in bytes; ok is false when it is cut short.
func decodeProgressExtra(b []byte, p *Progress) (n int, ok bool) {
	count, w := binary.Uvarint(b)
	if w <= 0 || count > uint64(len(b)) {
		return 0, false
	}
	n = w
	f := p.Counters.fields()
	for i := range count {
		v, w := binary.Uvarint(b[n:])
		if w <= 0 {
			return 0, false
		}
		if i < uint64(len(f)) {
			*f[i] = v
		}
		n += w
	}
	return n, true
}
