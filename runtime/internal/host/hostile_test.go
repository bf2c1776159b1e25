package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
	"github.com/groupstate/groupstate/runtime/internal/host/hostile"
	"github.com/groupstate/groupstate/runtime/internal/procmem"
)

// TestHostileCorpusCommitted: the committed modules of the corpus are what its generator
// writes (`make fixtures`), so the tests below run what the listings show.
func TestHostileCorpusCommitted(t *testing.T) {
	for _, m := range hostile.Corpus() {
		if !m.Committed {
			continue
		}
		for name, want := range map[string][]byte{m.Name + ".wasm": m.Wasm(), m.Name + ".wat": []byte(m.Listing())} {
			got, err := os.ReadFile(filepath.Join("testdata/hostile", name))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("testdata/hostile/%s differs from what the generator writes (%v): run make fixtures", name, err)
			}
		}
	}
}

// byteCounter is a slog.Handler that counts the bytes of the messages logged.
type byteCounter struct{ n *atomic.Int64 }

func (c byteCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c byteCounter) Handle(_ context.Context, r slog.Record) error {
	c.n.Add(int64(len(r.Message)))
	return nil
}
func (c byteCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c byteCounter) WithGroup(string) slog.Handler      { return c }

// peakRSS resets the process's peak resident set size (Linux's clear_refs) and returns a
// function that reads how far it rose since, in bytes; ok is false where the kernel does not
// support it.
func peakRSS(t *testing.T) (rise func() int64, ok bool) {
	debug.FreeOSMemory() // what earlier tests left is not this one's
	if !procmem.ResetPeak() {
		return nil, false
	}
	base := int64(procmem.RSS())
	return func() int64 { return int64(procmem.PeakRSS()) - base }, true
}

// TestHostileModules runs every module of the corpus (hostile.Corpus) as the runtime would:
// a module to refuse is refused when it loads, with a message naming the problem, within its
// time limit plus a margin; a module hostile for some keys fails those keys alone, with a
// clear error, while every other key of the same call is processed; and the host's memory
// and the module's log volume stay within their ceilings.
func TestHostileModules(t *testing.T) {
	const callTimeout = time.Second
	for _, m := range hostile.Corpus() {
		t.Run(m.Name, func(t *testing.T) {
			var wasm []byte
			if m.Committed {
				var err error
				if wasm, err = os.ReadFile(filepath.Join("testdata/hostile", m.Name+".wasm")); err != nil {
					t.Fatal(err)
				}
			} else {
				wasm = m.Wasm()
			}
			var logged atomic.Int64
			cfg := testConfig(wasm)
			cfg.Logger = slog.New(byteCounter{&logged})
			cfg.Limits.CallTimeout = callTimeout
			cfg.Limits.Instances = 2
			cfg.Limits.MemoryBytes = 16 << 20
			if m.MemoryBytes > 0 {
				cfg.Limits.MemoryBytes = m.MemoryBytes
			}
			if m.ABI == 2 {
				cfg.Init.ABIVersion = abi.Version2
			}
			rise, measured := peakRSS(t)
			start := time.Now()
			h, err := New(context.Background(), cfg)
			loaded := time.Since(start)
			if m.Outcome == hostile.Refused {
				if err == nil {
					h.Close(context.Background())
					t.Fatal("module accepted")
				}
				if !strings.Contains(err.Error(), m.Message) {
					t.Fatalf("err = %v, want it to contain %q", err, m.Message)
				}
				if loaded > callTimeout+5*time.Second {
					t.Errorf("refused after %v; the time limit is %v", loaded, callTimeout)
				}
				t.Logf("refused in %v: %v", loaded.Round(time.Millisecond), err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close(context.Background())
			keys := []string{"a", "x1", "b", "x2", "c"}
			failed := map[string]string{}
			// outcome records key i's result: its error, or its emits, which must be {"ok":true}.
			outcome := func(i int, err error, emits [][]byte) {
				if err != nil {
					failed[keys[i]] = err.Error()
				} else if len(emits) != 1 || string(emits[0]) != `{"ok":true}` {
					t.Errorf("%s: emits %q", keys[i], emits)
				}
			}
			start = time.Now()
			if m.ABI == 2 {
				call := &handler.CallV2{ProcessingTimeMs: 1000}
				for _, k := range keys {
					call.Groups = append(call.Groups, handler.GroupV2{Kind: abi.GroupData, Key: []byte(`"` + k + `"`), Rows: [][]byte{[]byte(`{}`)}})
				}
				res := make([]handler.ResultV2, len(keys))
				if err := h.ProcessV2(context.Background(), call, &recSession{}, res); err != nil {
					t.Fatal(err)
				}
				for i, r := range res {
					outcome(i, r.Err, r.Emits)
				}
			} else {
				call := &handler.Call{ProcessingTimeMs: 1000}
				for _, k := range keys {
					call.Groups = append(call.Groups, handler.Group{Key: []byte(`"` + k + `"`), Rows: [][]byte{[]byte(`{}`)}})
				}
				res := make([]handler.Result, len(keys))
				if err := h.Process(context.Background(), call, res); err != nil {
					t.Fatal(err)
				}
				for i, r := range res {
					outcome(i, r.Err, r.Emits)
				}
			}
			took := time.Since(start)
			for _, k := range keys {
				msg, bad := failed[k]
				switch {
				case strings.HasPrefix(k, "x") && !bad:
					t.Errorf("%s: not failed", k)
				case strings.HasPrefix(k, "x") && !strings.Contains(msg, m.Message):
					t.Errorf("%s: err = %s, want it to contain %q", k, msg, m.Message)
				case !strings.HasPrefix(k, "x") && bad:
					t.Errorf("%s (healthy): failed with %s", k, msg)
				}
			}
			// Each hostile key costs at most its own call's time limit; the healthy keys'
			// calls are quick.
			if limit := 2*callTimeout + 3*time.Second; took > limit {
				t.Errorf("the call took %v; want at most %v", took, limit)
			}
			if n := logged.Load(); n > 6*DefaultLogBytesPerCall {
				t.Errorf("the module logged %d bytes over a few calls; the ceiling is %d a call", n, DefaultLogBytesPerCall)
			}
			if measured {
				// Two instances' memory, the tables' ceiling, and a margin for the Go runtime
				// and the compiler (unbounded, table-grow took 1 GB, stack-overflow 255 MB).
				ceiling := int64(2*cfg.Limits.MemoryBytes) + 2*8*DefaultTableElements + 128<<20
				if r := rise(); r > ceiling {
					t.Errorf("peak RSS rose %d MB; the ceiling is %d MB", r>>20, ceiling>>20)
				}
			}
			t.Logf("took %v; failed %v", took.Round(time.Millisecond), failed)
		})
	}
}

// loopBatch runs n keys that loop ("x…") among n healthy ones through the corpus module
// name on instances instances, calls timing out after 100ms and retries within retry, and
// returns each key's error ("" when it emitted {"ok":true}) and how long it took.
func loopBatch(t *testing.T, name string, n, instances int, retry time.Duration) (map[string]string, time.Duration) {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join("testdata/hostile", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(wasm)
	cfg.Limits.CallTimeout, cfg.Limits.RetryTimeout, cfg.Limits.Instances = 100*time.Millisecond, retry, instances
	h, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	call := &handler.Call{ProcessingTimeMs: 1000}
	for i := range n {
		for _, k := range []string{fmt.Sprintf("h%02d", i), fmt.Sprintf("x%02d", i)} {
			call.Groups = append(call.Groups, handler.Group{Key: []byte(`"` + k + `"`), Rows: [][]byte{[]byte(`{}`)}})
		}
	}
	res := make([]handler.Result, len(call.Groups))
	start := time.Now()
	if err := h.Process(context.Background(), call, res); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	out := map[string]string{}
	for i, r := range res {
		k := strings.Trim(string(call.Groups[i].Key), `"`)
		switch {
		case r.Err != nil:
			out[k] = r.Err.Error()
		case len(r.Emits) != 1 || string(r.Emits[0]) != `{"ok":true}`:
			t.Errorf("%s: emits %q", k, r.Emits)
		default:
			out[k] = ""
		}
	}
	return out, took
}

// TestLoopingKeysPinned: 20 keys that loop among 20 healthy ones, in a module that says which
// group it runs: every looping key is failed with the time limit, every healthy key gets its
// result, whatever the retry budget (pinned failures are not bounded by it: each settles a
// key), and the retries use both instances.
func TestLoopingKeysPinned(t *testing.T) {
	const n = 20
	got, took := loopBatch(t, "loop-call", n, 2, 300*time.Millisecond)
	for k, msg := range got {
		if strings.HasPrefix(k, "x") != strings.Contains(msg, "per-call time limit") {
			t.Errorf("%s: %q", k, msg)
		}
	}
	// Each looping key costs its call in the batch and its call alone: 2n timeouts of 100ms,
	// over two instances.
	if limit := time.Duration(2*n)*100*time.Millisecond/2 + 3*time.Second; took > limit {
		t.Errorf("took %v; want at most %v", took, limit)
	}
	t.Logf("%d looping keys among %d healthy settled in %v", n, n, took)
}

// TestLoopingKeysAnonymous: a module that does not say which group it runs cannot have its
// failures pinned by the group running; its keys are retried one by one within the retry
// budget (limits.retry_timeout), and once that is spent the keys not retried fail saying so:
// the batch's time stays bounded.
func TestLoopingKeysAnonymous(t *testing.T) {
	const n = 20
	got, took := loopBatch(t, "loop-anonymous", n, 1, 600*time.Millisecond)
	stopped := 0
	for k, msg := range got {
		switch {
		case strings.Contains(msg, "the retry budget was spent"):
			stopped++
		case strings.HasPrefix(k, "x") && !strings.Contains(msg, "per-call time limit"):
			t.Errorf("%s: %q", k, msg)
		case strings.HasPrefix(k, "h") && msg != "":
			t.Errorf("%s: %q", k, msg)
		}
	}
	if stopped == 0 || took > 3*time.Second {
		t.Errorf("%d keys stopped by the budget after %v; want some, within the call timeout and the budget", stopped, took)
	}
}

// TestCompileTimeout: a module whose compilation takes longer than LoadLimits.CompileTimeout
// is refused at once with ErrCompileTimeout; its compilation ends in the background, which
// then closes what it made (WaitCompilations waits for it), without a panic or a leak of the
// caller's time.
func TestCompileTimeout(t *testing.T) {
	cfg := testConfig(hostile.SlowCompile(10_000).Wasm())
	cfg.Load.CompileTimeout = 50 * time.Millisecond
	cfg.Cache = nil // it must really compile
	start := time.Now()
	h, err := New(context.Background(), cfg)
	if err == nil {
		h.Close(context.Background())
		t.Fatal("module accepted")
	}
	if !errors.Is(err, ErrCompileTimeout) || time.Since(start) > time.Second {
		t.Fatalf("err = %v after %v; want ErrCompileTimeout at once", err, time.Since(start))
	}
	WaitCompilations()
	t.Logf("refused in %v; the compilation ended in the background after %v", err, time.Since(start))
}
