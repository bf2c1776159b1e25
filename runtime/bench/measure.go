package bench

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/handler"
	"github.com/groupstate/groupstate/runtime/internal/host"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/samples/sessions/go/session"
	groupstate "github.com/groupstate/groupstate/sdk/go"
)

// logincountHost starts a host of a logincount module (any language) the way the invoke
// measurements run it: one instance, processing-time timeouts, config idle_timeout 10s.
func logincountHost(ctx context.Context, wasm []byte, logger *slog.Logger) (*host.Host, error) {
	return host.New(ctx, host.Config{
		Wasm:   wasm,
		Init:   abi.Init{ABIVersion: abi.Version, Mode: abi.TimeoutProcessingTime, Name: []byte("bench"), Config: []byte(`{"idle_timeout":"10s"}`)},
		Logger: logger,
		Limits: host.Limits{Instances: 1, CallTimeout: 10 * time.Second, MemoryBytes: 256 << 20},
	})
}

// logincountCall is a call of n groups of one row each, every key with a state to update.
func logincountCall(n int) *handler.Call {
	call := &handler.Call{ProcessingTimeMs: 1000}
	for i := range n {
		call.Groups = append(call.Groups, handler.Group{
			Flags: abi.GroupStateExists,
			Key:   fmt.Appendf(nil, `"user-%06d"`, i),
			State: []byte(`{"login_count":41}`),
			Rows:  [][]byte{fmt.Appendf(nil, `{"user_id":"user-%06d","ts":1700000000000}`, i)},
		})
	}
	return call
}

// invoke measures ns per key group of logincount calls carrying n groups, for about d, and
// returns it with the linear memory of the instance that ran them (host.InstanceMemoryBytes).
func invoke(ctx context.Context, wasm []byte, n int, d time.Duration, logger *slog.Logger) (float64, uint64, error) {
	h, err := logincountHost(ctx, wasm, logger)
	if err != nil {
		return 0, 0, err
	}
	defer h.Close(ctx)
	call := logincountCall(n)
	res := make([]handler.Result, n)
	if err := h.Process(ctx, call, res); err != nil { // warm up
		return 0, 0, err
	}
	calls := 0
	start := time.Now()
	for time.Since(start) < d {
		if err := h.Process(ctx, call, res); err != nil {
			return 0, 0, err
		}
		calls++
	}
	if res[0].Err != nil {
		return 0, 0, res[0].Err
	}
	return float64(time.Since(start).Nanoseconds()) / float64(calls*n), h.InstanceMemoryBytes(), nil
}

const sessionsSpec = `
name: sessions
module: sessions.wasm
input: {subjects: ["clicks.>"]}
key: {field: user_id}
event_time: {field: ts, watermark_delay: 10s}
timeout: event_time
output: {subject: sessions.out}
config: {gap: 5s}
`

// engineSessions runs rows rows over keys keys of the sessions workload through the engine,
// with the WASM module wasm or (nil) the same handler compiled natively, in natives
// instances that split each call among them as a module's instances do, and returns rows/s.
func engineSessions(ctx context.Context, dir string, wasm []byte, natives, keys, rows int, logger *slog.Logger) (float64, error) {
	var mods []handler.BufferModule
	if wasm == nil {
		mods = make([]handler.BufferModule, max(natives, 1))
		for i := range mods {
			m := groupstate.NewModule()
			session.Register(m)
			mods[i] = m
		}
	}
	eng, err := startEngine(ctx, dir, []byte(sessionsSpec), wasm, mods, logger)
	if err != nil {
		return 0, err
	}
	defer eng.close(ctx)
	const batchRows = 10_000
	batch := make([]engine.Row, batchRows)
	next := 0
	at := int64(1)
	start := time.Now()
	for done := 0; done < rows; done += batchRows {
		for i := range batch {
			k := next % keys
			// Event time advances 1 ms per row: sessions grow, close after the gap and time
			// out as the watermark passes them; a prime stride spreads rows over all keys.
			batch[i].Data = fmt.Appendf(batch[i].Data[:0], `{"user_id":"u%06d","ts":%d,"page":"/p/%d"}`, k, 1_700_000_000_000+int64(next), k%97)
			next += 7919
		}
		at++
		in := engine.BatchInput{ProcessingTimeMs: at, Rows: batch}
		for {
			rep, err := eng.RunBatch(ctx, in)
			if err != nil {
				return 0, err
			}
			if !rep.NeedsNoDataBatch {
				break
			}
			in = engine.BatchInput{ProcessingTimeMs: at}
		}
	}
	return float64(rows) / time.Since(start).Seconds(), nil
}

// warmRestart measures how long a deployment's engine takes to start from a warm
// compilation cache: the cache is filled by a first start, then a fresh runtime starts it.
func warmRestart(ctx context.Context, cacheDir string, wasm []byte, logger *slog.Logger) (float64, error) {
	ms, _, err := warmRestartCPU(ctx, cacheDir, wasm, logger)
	return ms, err
}

// warmRestartCPU is warmRestart, with the CPU time the process spent during the warm start
// (user and system, every thread), in ms: the figure to judge on a loaded machine, where the
// start waits for a core.
func warmRestartCPU(ctx context.Context, cacheDir string, wasm []byte, logger *slog.Logger) (wallMs, cpuMs float64, err error) {
	sp, err := spec.ParseSpec([]byte(sessionsSpec))
	if err != nil {
		return 0, 0, err
	}
	start := func() (time.Duration, time.Duration, error) {
		rt, err := engine.New(engine.Options{CacheDir: cacheDir, Logger: logger})
		if err != nil {
			return 0, 0, err
		}
		defer rt.Close(ctx)
		t0, cpu0 := time.Now(), cpuTime()
		if err := rt.ValidateModule(ctx, sp, wasm); err != nil {
			return 0, 0, err
		}
		return time.Since(t0), cpuTime() - cpu0, nil
	}
	if _, _, err := start(); err != nil { // cold: compiles and fills the cache
		return 0, 0, err
	}
	d, cpu, err := start()
	return float64(d.Microseconds()) / 1000, float64(cpu.Microseconds()) / 1000, err
}
