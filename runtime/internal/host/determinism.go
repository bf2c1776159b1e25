package host

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"

	"github.com/groupstate/groupstate/abi"
)

// The guest's clocks and random bytes (abi/README.md 2.3) are functions of the call being
// run, never of the host's clock or of the instance's past: the wall clock reads the call's
// processing time T, the monotonic clock T plus a per-call count of readings, and random_get
// a stream seeded from the deployment's name, T and the key of the group being run.

const (
	// monotonicStep is how far the monotonic clock advances on each reading. A clock that
	// never moved would hang a language runtime that waits on it (wazero's own fake clock
	// advances for the same reason); a small step keeps a call's readings below the next
	// batch's T.
	monotonicStep = int64(time.Microsecond)

	// randomDomain starts every seed's input, so that the seeds are of this use alone.
	randomDomain = "groupstate random_get v1"
)

// The scopes of the random stream (abi/README.md 2.3), the byte after randomDomain.
const (
	scopeInstance byte = 0 // outside any call: instantiation and gs_init
	scopeCall     byte = 1 // in a call, before its first group_begin (or out of range)
	scopeGroup    byte = 2 // in a call, while the guest runs a group
)

// callEnv is what the clocks and the random source keep of one call.
type callEnv struct {
	timeMs int64 // the call's processing time T
	ticks  int64 // monotonic readings so far in the call
	// seeded says what the random stream is seeded for in this call: 0 nothing yet, 1 the
	// call (scopeCall), 2+i group i.
	seeded int32
}

// guestEnv is one instance's clocks and random source. The guest calls them on the
// goroutine that runs it, one call at a time, so they need no locks.
type guestEnv struct {
	in     *instance
	name   []byte // the deployment's name
	ticks  int64  // monotonic readings outside any call
	inCall bool   // rng is seeded for a call, not for the instance
	rng    rand.ChaCha8
	buf    []byte // the seed's input, reused
}

// newGuestEnv returns in's clocks and random source for the deployment called name, the
// random stream seeded for the instance.
func newGuestEnv(in *instance, name []byte) *guestEnv {
	e := &guestEnv{in: in, name: name}
	e.reseed(scopeInstance, 0, 0, nil)
	return e
}

// configure sets mc's wall clock, monotonic clock and random source to e's.
func (e *guestEnv) configure(mc wazero.ModuleConfig) wazero.ModuleConfig {
	return mc.
		WithWalltime(e.walltime, sys.ClockResolution(time.Millisecond)).
		WithNanotime(e.nanotime, sys.ClockResolution(monotonicStep)).
		WithRandSource(e)
}

// walltime is the wall clock: the call's T, constant for the whole call; the Unix epoch
// outside any call.
func (e *guestEnv) walltime() (sec int64, nsec int32) {
	cs := e.in.current.Load()
	if cs == nil {
		return 0, 0
	}
	sec, ms := cs.env.timeMs/1000, cs.env.timeMs%1000
	if ms < 0 {
		sec, ms = sec-1, ms+1000
	}
	return sec, int32(ms) * int32(time.Millisecond)
}

// nanotime is the monotonic clock: T (in nanoseconds) plus monotonicStep times the number of
// readings in the call so far, this one included; outside any call, T is 0 and the readings
// are counted from the instance's start.
func (e *guestEnv) nanotime() int64 {
	cs := e.in.current.Load()
	if cs == nil {
		e.ticks++
		return e.ticks * monotonicStep
	}
	cs.env.ticks++
	return cs.env.timeMs*int64(time.Millisecond) + cs.env.ticks*monotonicStep
}

// Read implements io.Reader for random_get: the stream of the scope the guest is in,
// continued from its last read in that scope, or started afresh when the scope changed.
func (e *guestEnv) Read(p []byte) (int, error) {
	cs := e.in.current.Load()
	switch {
	case cs == nil:
		if e.inCall {
			e.reseed(scopeInstance, 0, 0, nil)
			e.inCall = false
		}
	default:
		g := cs.groupIndex()
		kind, key, ok := cs.groupSeed(g)
		mark := int32(1)
		if ok {
			mark = 2 + int32(g)
		}
		if cs.env.seeded != mark {
			if ok {
				e.reseed(scopeGroup, cs.env.timeMs, kind, key)
			} else {
				e.reseed(scopeCall, cs.env.timeMs, 0, nil)
			}
			cs.env.seeded, e.inCall = mark, true
		}
	}
	return e.rng.Read(p)
}

// reseed starts the stream of a scope: ChaCha8 keyed with the SHA-256 of randomDomain, the
// scope, the deployment's name (u32 length, bytes) and, from scopeCall on, T (i64); for
// scopeGroup, the group's kind (u32) and key (u32 length, bytes); little-endian.
func (e *guestEnv) reseed(scope byte, timeMs int64, kind uint32, key []byte) {
	b := append(e.buf[:0], randomDomain...)
	b = append(b, scope)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(e.name)))
	b = append(b, e.name...)
	if scope >= scopeCall {
		b = binary.LittleEndian.AppendUint64(b, uint64(timeMs))
	}
	if scope == scopeGroup {
		b = binary.LittleEndian.AppendUint32(b, kind)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(key)))
		b = append(b, key...)
	}
	e.buf = b
	e.rng.Seed(sha256.Sum256(b))
}

// groupSeed returns the kind (ABI v2; 0 for v1) and key of group i of the call, and false
// when i is not one of its groups.
func (c *callState) groupSeed(i int) (kind uint32, key []byte, ok bool) {
	if c.sess != nil {
		if i < 0 || i >= len(c.groupsV2) {
			return 0, nil, false
		}
		return uint32(c.groupsV2[i].Kind), c.groupsV2[i].Key, true
	}
	if i < 0 || i >= len(c.groups) {
		return 0, nil, false
	}
	return uint32(abi.GroupData), c.groups[i].Key, true
}
