package state

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Key layout; see the package documentation.
const (
	deploymentTag = 'd'

	sectionValue    = 'v'
	sectionTimer    = 't'
	sectionProgress = 'm'
	sectionOutbox   = 'o'
	sectionSkip     = 's' // keys the open batch must not time out (Batch.SkipTimeout)
	sectionInitial  = 'i' // the initial state was applied (Batch.MarkInitialStateApplied)
	sectionTimeMode = 'n' // the timeout mode state variables were declared under (Batch.SetTimeMode)
	// sectionInputs ('w', inputwatermarks.go): the named inputs' watermarks.
	// sectionQuarantine ('q', quarantine.go): the quarantined keys.
	// sectionAttempt ('a', attempt.go): the attempts of the next batch.

	maxNameLen = 255
)

// formatKey holds the store's FormatVersion. It sorts before every
// deployment key.
var formatKey = []byte("\x00format")

// idKey holds the store's identity (see Store.ID).
var idKey = []byte("\x00id")

// ValidateName reports whether name is a valid keyspace name: a deployment
// name, 1 to 255 characters from [a-z0-9-], optionally followed by a
// partition suffix ".<partition>" (see [PartitionName]), 255 characters in
// all at most. The error wraps ErrInvalidName.
func ValidateName(name string) error {
	if len(name) == 0 || len(name) > maxNameLen {
		return fmt.Errorf("%w: %q: length must be 1..%d", ErrInvalidName, name, maxNameLen)
	}
	base, part, dotted := strings.Cut(name, ".")
	if base == "" {
		return fmt.Errorf("%w: %q: the deployment name is empty", ErrInvalidName, name)
	}
	for i := 0; i < len(base); i++ {
		c := base[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return fmt.Errorf("%w: %q: only [a-z0-9-] allowed", ErrInvalidName, name)
		}
	}
	if dotted {
		if p, err := strconv.Atoi(part); err != nil || p < 0 || strconv.Itoa(p) != part {
			return fmt.Errorf("%w: %q: the partition after the dot must be a number without leading zeros", ErrInvalidName, name)
		}
	}
	return nil
}

// PartitionName is the keyspace name of partition p of a deployment split
// into partitions: "<deployment>.<p>". A deployment of one partition keeps
// the keyspace of its own name.
func PartitionName(deployment string, p int) string {
	return deployment + "." + strconv.Itoa(p)
}

// deploymentPrefix returns 'd' u8(len(name)) name.
func deploymentPrefix(name string) []byte {
	p := make([]byte, 0, 2+len(name))
	p = append(p, deploymentTag, byte(len(name)))
	return append(p, name...)
}

// prefixEnd returns the smallest key greater than every key with prefix p,
// or nil when there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// sectionKey appends prefix and section to dst.
func sectionKey(dst, prefix []byte, section byte) []byte {
	dst = append(dst, prefix...)
	return append(dst, section)
}

// valueKey appends prefix 'v' key to dst.
func valueKey(dst, prefix, key []byte) []byte {
	return append(sectionKey(dst, prefix, sectionValue), key...)
}

// skipKey appends prefix 's' key to dst.
func skipKey(dst, prefix, key []byte) []byte {
	return append(sectionKey(dst, prefix, sectionSkip), key...)
}

// timerBits maps a timestamp to a uint64 whose unsigned order is the
// timestamps' signed order.
func timerBits(ts int64) uint64 { return uint64(ts) ^ (1 << 63) }

// timerKey appends prefix 't' u64(ts^sign) key to dst. With a nil key it is
// the lower bound of all timers at ts.
func timerKey(dst, prefix []byte, ts int64, key []byte) []byte {
	dst = sectionKey(dst, prefix, sectionTimer)
	dst = binary.BigEndian.AppendUint64(dst, timerBits(ts))
	return append(dst, key...)
}

// parseTimerKey splits the part of a timer key after prefix 't'.
func parseTimerKey(rest []byte) (ts int64, key []byte, ok bool) {
	if len(rest) < 8 {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(rest) ^ (1 << 63)), rest[8:], true
}

// outboxKey appends prefix 'o' u64(batch) u32(seq) to dst.
func outboxKey(dst, prefix []byte, id OutboxID) []byte {
	dst = sectionKey(dst, prefix, sectionOutbox)
	dst = binary.BigEndian.AppendUint64(dst, id.BatchID)
	return binary.BigEndian.AppendUint32(dst, id.Seq)
}

// parseOutboxKey parses the part of an outbox key after prefix 'o'.
func parseOutboxKey(rest []byte) (OutboxID, bool) {
	if len(rest) != 12 {
		return OutboxID{}, false
	}
	return OutboxID{
		BatchID: binary.BigEndian.Uint64(rest),
		Seq:     binary.BigEndian.Uint32(rest[8:]),
	}, true
}
