package host

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
)

// probeCache spares the tests below a compilation per host (testConfig's cache does so too;
// the tests name it, as they rely on it).
var probeCache = testCache

// probeHost starts the probe module (runtime/engine/testdata/probe) for the deployment
// called name, with the given pool size and groups per call.
func probeHost(t *testing.T, name string, instances, perCall int) *Host {
	t.Helper()
	wasm, err := os.ReadFile("../../engine/testdata/probe/probe.wasm")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(wasm)
	cfg.Cache = probeCache
	cfg.Init.Name = []byte(name)
	cfg.Limits.Instances = instances
	cfg.Limits.MaxGroupsPerCall = perCall
	h, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

// probeEmit is what the probe's clock, random and init ops emit.
type probeEmit struct {
	Tag    string          `json:"tag"`
	Key    json.RawMessage `json:"key"`
	WallNs int64           `json:"wall_ns"`
	Hex    string          `json:"hex"`
}

// runProbe runs one Process at T with one group per key (keys are JSON), each with one row
// running ops (a JSON array of probe ops), and returns each group's emits in order.
func runProbe(t *testing.T, h *Host, T int64, keys []string, ops string) [][]probeEmit {
	t.Helper()
	call := &handler.Call{ProcessingTimeMs: T}
	for _, k := range keys {
		call.Groups = append(call.Groups, handler.Group{Key: []byte(k), Rows: [][]byte{[]byte(`{"ops": ` + ops + `}`)}})
	}
	res := make([]handler.Result, len(keys))
	if err := h.Process(context.Background(), call, res); err != nil {
		t.Fatal(err)
	}
	return decodeEmits(t, keys, func(i int) ([][]byte, error) { return res[i].Emits, res[i].Err })
}

func decodeEmits(t *testing.T, keys []string, result func(i int) ([][]byte, error)) [][]probeEmit {
	t.Helper()
	out := make([][]probeEmit, len(keys))
	for i := range keys {
		emits, err := result(i)
		if err != nil {
			t.Fatalf("group %s: %v", keys[i], err)
		}
		for _, e := range emits {
			var p probeEmit
			if err := json.Unmarshal(e, &p); err != nil {
				t.Fatalf("group %s emitted %s: %v", keys[i], e, err)
			}
			out[i] = append(out[i], p)
		}
	}
	return out
}

// TestGuestWallClock: time.Now() in a guest is the call's processing time T, in every group of
// the call and at every reading, whatever the instance and the chunking, in ABI v1 and v2.
func TestGuestWallClock(t *testing.T) {
	keys := []string{`"a"`, `"b"`, `"c"`, `"d"`, `"e"`}
	const ops = `[{"clock": "c1"}, {"random": 3}, {"clock": "c2"}]`
	tests := []struct {
		name               string
		T                  int64
		instances, perCall int
	}{
		{"one call", 1000, 1, 4096},
		{"a call per group on three instances", 1_700_000_000_123, 3, 1},
		{"two groups per call on two instances", 42, 2, 2},
		{"before the epoch", -1500, 2, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := probeHost(t, "t", tt.instances, tt.perCall)
			for range 2 { // the second time on instances that ran calls already
				for i, emits := range runProbe(t, h, tt.T, keys, ops) {
					for _, e := range emits {
						if e.Tag != "random" && e.WallNs != tt.T*int64(time.Millisecond) {
							t.Errorf("group %s: %s read %d ns, want T = %d ms", keys[i], e.Tag, e.WallNs, tt.T)
						}
					}
				}
			}
		})
	}

	t.Run("ABI v2", func(t *testing.T) {
		wasm, err := os.ReadFile("../../engine/testdata/v2probe/v2probe.wasm")
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(wasm)
		cfg.Cache = probeCache
		cfg.Init.Mode = abi.TimeoutProcessingTime
		cfg.Limits.MaxGroupsPerCall = 2
		h, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close(context.Background())
		const T = 1_700_000_000_456
		call := &handler.CallV2{ProcessingTimeMs: T}
		for _, k := range keys {
			call.Groups = append(call.Groups, handler.GroupV2{Kind: abi.GroupData, Key: []byte(k), Rows: [][]byte{[]byte(`{"ops": [{"clock": "c1"}, {"clock": "c2"}]}`)}})
		}
		res := make([]handler.ResultV2, len(keys))
		if err := h.ProcessV2(context.Background(), call, &recSession{cur: -1}, res); err != nil {
			t.Fatal(err)
		}
		for i, emits := range decodeEmits(t, keys, func(i int) ([][]byte, error) { return res[i].Emits, res[i].Err }) {
			if len(emits) != 2 {
				t.Fatalf("group %s: %d emits", keys[i], len(emits))
			}
			for _, e := range emits {
				if e.WallNs != T*int64(time.Millisecond) {
					t.Errorf("group %s: %s read %d ns, want T = %d ms", keys[i], e.Tag, e.WallNs, int64(T))
				}
			}
		}
	})
}

// TestGuestRandomPerKey: the bytes a key's group reads from random_get (Go's crypto/rand)
// depend on the deployment's name, T and the key only: not on the instance that runs the
// group, the instance's past calls, the other keys of the call or how the call was chunked.
func TestGuestRandomPerKey(t *testing.T) {
	const ops = `[{"random": 16}]`
	one := probeHost(t, "t", 1, 4096)
	many := probeHost(t, "t", 3, 1) // a call per group, spread over three instances
	pairs := probeHost(t, "t", 2, 2)
	other := probeHost(t, "u", 1, 4096)
	// Some history on each instance, reading random bytes in and out of groups.
	for _, h := range []*Host{many, pairs} {
		runProbe(t, h, 5, []string{`"w"`, `"x"`, `"y"`, `"z"`, `1`, `2`}, `[{"random": 5}, {"random": 100}]`)
	}

	// randomOf returns the bytes key read in a call at T of keys on h.
	randomOf := func(h *Host, T int64, keys []string, key string) string {
		t.Helper()
		for i, emits := range runProbe(t, h, T, keys, ops) {
			if keys[i] == key {
				return emits[0].Hex
			}
		}
		t.Fatalf("no group %s", key)
		return ""
	}
	ref := randomOf(one, 1000, []string{`"a"`}, `"a"`)
	// ref pins the derivation (abi/README.md 2.3): a replay on another runtime version must
	// read the same bytes.
	if want := "981fceb09b3068d9fbf84bfc99c57e51"; ref != want {
		t.Errorf(`deployment "t", T 1000, key "a": %s, want %s`, ref, want)
	}
	tests := []struct {
		name string
		h    *Host
		T    int64
		keys []string
		key  string
		same bool
	}{
		{"the same call again", one, 1000, []string{`"a"`}, `"a"`, true},
		{"after other keys in the call", one, 1000, []string{`"b"`, `"c"`, `"a"`}, `"a"`, true},
		{"a call per group, several instances", many, 1000, []string{`"x"`, `"y"`, `"a"`, `"z"`}, `"a"`, true},
		{"chunks of two, two instances", pairs, 1000, []string{`"b"`, `"c"`, `"d"`, `"a"`, `"e"`}, `"a"`, true},
		{"another key", one, 1000, []string{`"a"`, `"b"`}, `"b"`, false},
		{"the same text as a number", one, 1000, []string{`"a"`, `1`}, `1`, false},
		{"another T", many, 1001, []string{`"a"`}, `"a"`, false},
		{"another deployment", other, 1000, []string{`"a"`}, `"a"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := randomOf(tt.h, tt.T, tt.keys, tt.key)
			if (got == ref) != tt.same {
				t.Errorf("key %s at T %d: %s; deployment t, key \"a\", T 1000: %s (want same: %v)", tt.key, tt.T, got, ref, tt.same)
			}
		})
	}

	t.Run("a group's reads continue one stream", func(t *testing.T) {
		whole := runProbe(t, many, 1000, []string{`"b"`, `"a"`}, `[{"random": 16}, {"random": 5}]`)[1]
		split := runProbe(t, pairs, 1000, []string{`"a"`}, `[{"random": 3}, {"random": 13}, {"random": 5}]`)[0]
		if got := whole[0].Hex; got != ref {
			t.Errorf("first read %s, want %s", got, ref)
		}
		if got := split[0].Hex + split[1].Hex; got != ref {
			t.Errorf("3 then 13 bytes: %s, want %s", got, ref)
		}
		if whole[1].Hex != split[2].Hex {
			t.Errorf("the bytes after the first 16: %s and %s", whole[1].Hex, split[2].Hex)
		}
	})
}

// TestGuestStartup: what an instance reads of the clock and random_get while it starts
// (instantiation, the Go runtime's and the module's init) is the same in every instance of a
// deployment: the wall clock is the Unix epoch, the random bytes depend on the deployment's
// name alone.
func TestGuestStartup(t *testing.T) {
	keys := []string{`"a"`, `"b"`, `"c"`, `"d"`}
	startup := func(h *Host) map[string]bool {
		t.Helper()
		seen := map[string]bool{}
		for i, emits := range runProbe(t, h, 1000, keys, `[{"init": "i"}]`) {
			if e := emits[0]; e.WallNs != 0 {
				t.Errorf("group %s: the instance started at %d ns, want 0", keys[i], e.WallNs)
			}
			seen[emits[0].Hex] = true
		}
		return seen
	}
	a, b, u := startup(probeHost(t, "t", 4, 1)), startup(probeHost(t, "t", 2, 1)), startup(probeHost(t, "u", 1, 1))
	if len(a) != 1 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("deployment t's instances started with %v and %v, want one value", a, b)
	}
	if fmt.Sprint(a) == fmt.Sprint(u) {
		t.Errorf("deployments t and u both started with %v", a)
	}
}

// TestGuestClocks: the clocks' rules, reading by reading: the wall clock is T in a call and
// the epoch outside; the monotonic clock advances by monotonicStep per reading, from T in a
// call (reset at each call) and from 0 outside.
func TestGuestClocks(t *testing.T) {
	in := &instance{}
	e := newGuestEnv(in, []byte("t"))
	step := monotonicStep
	ms := int64(time.Millisecond)
	type reading struct {
		call *callState // nil: outside any call
		sec  int64
		nsec int32
		mono int64
	}
	c1 := &callState{env: callEnv{timeMs: 5_250}}
	c2 := &callState{env: callEnv{timeMs: 5_250}}
	c3 := &callState{env: callEnv{timeMs: -1}}
	steps := []reading{
		{nil, 0, 0, step},
		{nil, 0, 0, 2 * step},
		{c1, 5, 250_000_000, 5_250*ms + step},
		{c1, 5, 250_000_000, 5_250*ms + 2*step},
		{c2, 5, 250_000_000, 5_250*ms + step}, // a new call at the same T starts again
		{c3, -1, 999_000_000, -ms + step},
		{nil, 0, 0, 3 * step},
	}
	for i, r := range steps {
		in.current.Store(r.call)
		sec, nsec := e.walltime()
		if mono := e.nanotime(); sec != r.sec || nsec != r.nsec || mono != r.mono {
			t.Errorf("reading %d: wall %d s %d ns, monotonic %d; want %d s %d ns, %d", i, sec, nsec, mono, r.sec, r.nsec, r.mono)
		}
	}
	if step != 1000 {
		t.Errorf("monotonicStep = %d ns; abi/README.md 2.3 says 1000", step)
	}
}
