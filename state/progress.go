package state

import (
	"encoding/binary"
	"fmt"
)

// Progress is a deployment's committed progress, written by every
// Batch.Commit.
type Progress struct {
	// BatchID is the id of the last committed batch; 0 means none yet.
	BatchID uint64
	// WatermarkMs is the event-time watermark after that batch.
	WatermarkMs int64
	// Position is the input position included (for example the last
	// JetStream stream sequence).
	Position uint64
	// Keys is the number of keys with a state value, maintained by
	// Batch.Set.
	Keys int64
	// TimerKeys is the number of keys with a timeout, maintained by
	// Batch.Set.
	TimerKeys int64
}

const (
	progressVersion = 1
	progressLen     = 1 + 8*5
)

func appendProgress(dst []byte, p Progress) []byte {
	dst = append(dst, progressVersion)
	dst = binary.BigEndian.AppendUint64(dst, p.BatchID)
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.WatermarkMs))
	dst = binary.BigEndian.AppendUint64(dst, p.Position)
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.Keys))
	return binary.BigEndian.AppendUint64(dst, uint64(p.TimerKeys))
}

func decodeProgress(b []byte) (Progress, error) {
	if len(b) != progressLen || b[0] != progressVersion {
		return Progress{}, fmt.Errorf("%w: progress record of %d bytes", ErrCorrupt, len(b))
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(b[1+8*i:]) }
	return Progress{
		BatchID:     u(0),
		WatermarkMs: int64(u(1)),
		Position:    u(2),
		Keys:        int64(u(3)),
		TimerKeys:   int64(u(4)),
	}, nil
}
