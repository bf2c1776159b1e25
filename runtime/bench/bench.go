// Package bench is `groupstate bench`: it measures groupstate against the limits of its parts
// and against baselines, in one process and one run, and reports ratios (judge by them: the
// machines are noisy) beside the absolute figures. docs/performance.md lists the targets.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"time"

	"github.com/groupstate/groupstate/internal/pybuild"
)

// Options configures [Run].
type Options struct {
	// Quick runs small sizes, to finish in about a minute (CI's smoke run).
	Quick bool
	// SamplesDir is the samples folder holding the modules (default "samples").
	SamplesDir string
	// Progress receives a line per measurement as it finishes. Default io.Discard.
	Progress io.Writer
}

// Report holds the figures. The JSON names of wasm_native_ratio, e2e_raw_ratio,
// invoke_ns_per_group and extism_speedup are a contract (scripts read them).
type Report struct {
	// WasmNativeRatio is engine throughput on sessions with the Go module over the very same
	// Go code compiled natively, in the same engine, on its best native run: on one instance
	// or on as many as a module gets (target >= 0.75). Per language in EngineRowsPerSec;
	// WasmNativeRatioBest is the best language's (the same logic, other code).
	WasmNativeRatio     float64 `json:"wasm_native_ratio"`
	WasmNativeRatioBest float64 `json:"wasm_native_ratio_best"`
	BestLanguage        string  `json:"wasm_native_best_language"`
	// NativeBaseline names the native run the ratios compare with, the faster of
	// EngineRowsPerSec's "native_1" (one instance) and "native" (limits.instances instances),
	// and NativeBestRowsPerSec is its figure.
	NativeBaseline       string  `json:"wasm_native_baseline"`
	NativeBestRowsPerSec float64 `json:"native_best_rows_per_sec"`
	// E2ERawRatio is end-to-end throughput (JetStream in, WASM, Pebble, JetStream out) over a
	// raw consume-and-republish of the same messages. E2ECeilingRatio is the same throughput
	// over the embedded server's own publish ceiling, NATSPubRowsPerSec (target >= 0.8): the
	// raw pass-through publishes with nats.go's futures, one per message, and can lose to
	// groupstate, whose publishes and acknowledgements are batched; the server alone cannot.
	E2ERawRatio     float64 `json:"e2e_raw_ratio"`
	E2ECeilingRatio float64 `json:"e2e_ceiling_ratio"`
	// InvokeNsPerGroup is the amortized cost of a key group in a guest call at the engine's
	// default batch shape (4096 groups per call), best language (target <= 500).
	InvokeNsPerGroup float64 `json:"invoke_ns_per_group"`
	// ExtismSpeedup is the cost of an Extism plugin call per group (the same logic, in C)
	// over groupstate's per-group cost with the C module at 4096 groups per call
	// (target >= 10).
	ExtismSpeedup    *float64 `json:"extism_speedup"`
	ExtismNsPerGroup float64  `json:"extism_ns_per_group"`

	// Details.
	Quick            bool                          `json:"quick"`
	InvokeNs         map[string]map[string]float64 `json:"invoke_ns_per_group_by_language"`
	EngineRowsPerSec map[string]float64            `json:"engine_rows_per_sec"`
	E2ERowsPerSec    float64                       `json:"e2e_rows_per_sec"`
	RawRowsPerSec    float64                       `json:"raw_rows_per_sec"`
	// ChangelogRatio is end-to-end throughput with replication: changelog over the same
	// deployment without it, on one server (target >= 0.5); the figures in
	// ReplicationRowsPerSec ("none", "changelog").
	ChangelogRatio float64 `json:"changelog_ratio"`
	// ABIv2Ratio is engine throughput of the same per-key counting as an ABI v2
	// (transformWithState) processor, its count in a value state variable read with a state
	// request, over the ABI v1 module that gets its state with the group (Go, both); the
	// figures in ABIRowsPerSec ("v1", "v2").
	ABIv2Ratio float64 `json:"abi_v2_ratio"`
	// JoinRowsPerSec is engine throughput of the adjoin sample (a stream-stream join, Go
	// module) over JoinAds ads, half impressions and half clicks; JoinState its state at every
	// tenth of the run, and JoinStateGrowth the rows it holds at the end over those at 60%
	// (about 1 when the state levels off once the watermark moves, as it must).
	JoinRowsPerSec  float64            `json:"join_rows_per_sec"`
	JoinAds         int                `json:"join_ads"`
	JoinRows        int                `json:"join_rows"`
	JoinState       []JoinPoint        `json:"join_state"`
	JoinStateGrowth float64            `json:"join_state_growth"`
	ABIRowsPerSec   map[string]float64 `json:"abi_rows_per_sec"`
	// PythonGoRatio is engine throughput of the logincount sample in Python over the Go
	// module's on the counting workload of ABIRowsPerSec (target >= 0.3); both figures in
	// LogincountRowsPerSec ("go", "python").
	PythonGoRatio        float64            `json:"python_go_logincount_ratio"`
	LogincountRowsPerSec map[string]float64 `json:"logincount_rows_per_sec"`
	// PythonABIv2Ratio is ABIv2Ratio in Python: the same counting as a Python
	// StatefulProcessor (ABI v2) over a Python function (ABI v1), on fewer keys and rows; the
	// figures in PythonABIRowsPerSec ("v1", "v2").
	PythonABIv2Ratio    float64            `json:"python_abi_v2_ratio"`
	PythonABIRowsPerSec map[string]float64 `json:"python_abi_rows_per_sec"`
	// WarmStartMs is, per language, how long a new runtime takes to have its first instance
	// of the sessions module ready from a warm compilation cache (load the compiled code,
	// instantiate, init; WarmRestartMs is Go's; target <= 100); InstanceStartMs how long a
	// running host takes to make one more instance of logincount (the median of 5), and
	// InstanceMemoryMB the linear memory of an instance after logincount's calls of 4096
	// groups (target <= 32 MB).
	WarmStartMs           map[string]float64 `json:"warm_start_ms_by_language"`
	InstanceStartMs       map[string]float64 `json:"instance_start_ms_by_language"`
	InstanceMemoryMB      map[string]float64 `json:"instance_memory_mb_by_language"`
	ReplicationRowsPerSec map[string]float64 `json:"replication_rows_per_sec"`
	LatencyP50Ms          float64            `json:"latency_p50_ms"`
	LatencyP99Ms          float64            `json:"latency_p99_ms"`
	LatencyRate           int                `json:"latency_rows_per_sec"`
	// MaxRateP99 is the highest rate tried (rows/s, in steps) at which the p99 latency stayed
	// under 25 ms (0: none); LatencyP99ByRate the p99 at each rate tried, up to the first over.
	MaxRateP99       int                `json:"max_rate_p99_25ms"`
	LatencyP99ByRate map[string]float64 `json:"latency_p99_ms_by_rate"`
	// NATSPubRowsPerSec and NATSConsumeRowsPerSec are the embedded JetStream server alone:
	// async publishes with message ids, and a consume acknowledging every message (natsLimits),
	// the ceiling e2e_rows_per_sec sits under.
	NATSPubRowsPerSec     float64 `json:"nats_pub_rows_per_sec"`
	NATSConsumeRowsPerSec float64 `json:"nats_consume_rows_per_sec"`
	WarmRestartMs         float64 `json:"warm_restart_ms"`
	// Memory is RSS as state grows to MemoryKeys keys; MemoryGrowth is RSS at the end over RSS
	// at a tenth of the way (flat is 1).
	Memory       []MemoryPoint `json:"memory"`
	MemoryKeys   int           `json:"memory_keys"`
	MemoryGrowth float64       `json:"memory_growth"`
	// StateGrowthRatio is engine throughput on a working set of 100k existing keys, spread over all of them (a tenth
	// of MemoryKeys when less; the C logincount, batches of 10k rows on keys drawn uniformly)
	// when the store holds MemoryKeys keys over the same when it holds just those (target >=
	// 0.7). StateUniformRatio is the same throughput with every key of the MemoryKeys in the
	// working set over the first figure (it reads Pebble for every row: the worst case).
	// StateRowsPerSec holds the three figures.
	StateGrowthRatio  float64      `json:"state_growth_ratio"`
	StateUniformRatio float64      `json:"state_uniform_ratio"`
	StateRowsPerSec   []StatePoint `json:"state_rows_per_sec"`
	// TimeoutRatio is the rate of timeout calls when TimeoutKeys keys' processing-time
	// timeouts expire in one batch over the rate of the data calls that set them (C
	// logincount; target >= 0.5); TimeoutRSSMB the highest RSS while they fired and
	// TimeoutFillRSSMB while the data calls set them (garbage included): bounded, the first is
	// not above the second.
	TimeoutRatio           float64 `json:"timeout_ratio"`
	TimeoutKeys            int     `json:"timeout_keys"`
	TimeoutCallsPerSec     float64 `json:"timeout_calls_per_sec"`
	TimeoutDataCallsPerSec float64 `json:"timeout_data_calls_per_sec"`
	TimeoutRSSMB           float64 `json:"timeout_rss_mb"`
	TimeoutFillRSSMB       float64 `json:"timeout_fill_rss_mb"`
	Keys                   int     `json:"engine_keys"`
	Rows                   int     `json:"engine_rows"`
	Seconds                float64 `json:"seconds"`
}

// settle collects the garbage of the previous measurement, so its heap does not pause the
// next one.
func settle() {
	goruntime.GC()
	debug.FreeOSMemory()
}

// benchModule reads the module of sample in lang from samplesDir; Python's is built from
// samples/<sample>/python/<sample>.py and the runtime module (internal/pybuild).
func benchModule(samplesDir, sample, lang string) ([]byte, error) {
	if lang == "python" {
		src, err := os.ReadFile(filepath.Join(samplesDir, sample, "python", sample+".py"))
		if err != nil {
			return nil, err
		}
		return pybuild.Build(map[string][]byte{sample + ".py": src}, sample+":handle")
	}
	return os.ReadFile(filepath.Join(samplesDir, sample, lang, sample+".wasm"))
}

// languages are the sample languages measured. Python's modules are not committed: they are
// made from samples/<name>/python/<name>.py and the runtime module (internal/pybuild).
var languages = []string{"go", "rust", "c", "assemblyscript", "python"}

// Run runs every measurement.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.SamplesDir == "" {
		opts.SamplesDir = "samples"
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	start := time.Now()
	rep := &Report{Quick: opts.Quick}
	logf := func(format string, args ...any) { fmt.Fprintf(opts.Progress, format+"\n", args...) }
	tmp, err := os.MkdirTemp("", "groupstate-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	quiet := slog.New(slog.DiscardHandler)
	module := func(sample, lang string) ([]byte, error) { return benchModule(opts.SamplesDir, sample, lang) }

	// 1. Guest invocation, per language and batch size.
	rep.InvokeNs = map[string]map[string]float64{}
	rep.InstanceMemoryMB = map[string]float64{}
	rep.InvokeNsPerGroup = -1
	for _, lang := range languages {
		wasm, err := module("logincount", lang)
		if err != nil {
			return nil, err
		}
		rep.InvokeNs[lang] = map[string]float64{}
		for _, n := range []int{1, 16, 256, 4096} {
			d := 300 * time.Millisecond
			if !opts.Quick {
				d = 2 * time.Second
			}
			ns, mem, err := invoke(ctx, wasm, n, d, quiet)
			if err != nil {
				return nil, fmt.Errorf("bench: invoke %s: %w", lang, err)
			}
			rep.InstanceMemoryMB[lang] = max(rep.InstanceMemoryMB[lang], float64(mem)/(1<<20))
			rep.InvokeNs[lang][fmt.Sprint(n)] = ns
			if n == 4096 && (rep.InvokeNsPerGroup < 0 || ns < rep.InvokeNsPerGroup) {
				rep.InvokeNsPerGroup = ns
			}
		}
		logf("invoke %-15s %8.0f ns/group at 1, %6.0f at 16, %6.0f at 256, %6.0f at 4096 groups per call; instance memory %.1f MB", lang,
			rep.InvokeNs[lang]["1"], rep.InvokeNs[lang]["16"], rep.InvokeNs[lang]["256"], rep.InvokeNs[lang]["4096"], rep.InstanceMemoryMB[lang])
	}

	// 1a. Starting, per language: a new runtime's first instance from a warm compilation
	// cache (the sessions module), and one more instance on a running host (logincount).
	rep.WarmStartMs, rep.InstanceStartMs = map[string]float64{}, map[string]float64{}
	for _, lang := range languages {
		sessions, err := module("sessions", lang)
		if err != nil {
			return nil, err
		}
		if rep.WarmStartMs[lang], err = warmRestart(ctx, filepath.Join(tmp, "cache-"+lang), sessions, quiet); err != nil {
			return nil, fmt.Errorf("bench: warm start %s: %w", lang, err)
		}
		count, err := module("logincount", lang)
		if err != nil {
			return nil, err
		}
		if rep.InstanceStartMs[lang], err = instanceStart(ctx, count, 5, quiet); err != nil {
			return nil, fmt.Errorf("bench: instance start %s: %w", lang, err)
		}
		logf("start  %-15s %8.1f ms a new runtime's first instance from a warm compilation cache, %6.1f ms one more instance", lang,
			rep.WarmStartMs[lang], rep.InstanceStartMs[lang])
	}

	// 2. Latency at a fixed rate.
	rep.LatencyRate = 10_000
	secs := 5
	if opts.Quick {
		secs = 2
	}
	wasm, err := module("logincount", "rust")
	if err != nil {
		return nil, err
	}
	settle()
	p50, p99, err := latency(ctx, filepath.Join(tmp, "latency"), wasm, rep.LatencyRate, secs, quiet)
	if err != nil {
		return nil, fmt.Errorf("bench: latency: %w", err)
	}
	rep.LatencyP50Ms, rep.LatencyP99Ms = p50, p99
	logf("latency p50 %.2f ms, p99 %.2f ms at %d rows/s for %ds", p50, p99, rep.LatencyRate, secs)
	// 2a. The highest rate with p99 under 25 ms, in steps.
	rates := []int{20_000, 30_000, 40_000, 50_000, 60_000, 80_000}
	if opts.Quick {
		rates = rates[:3]
	}
	rep.LatencyP99ByRate = map[string]float64{fmt.Sprint(rep.LatencyRate): p99}
	if p99 < 25 {
		rep.MaxRateP99 = rep.LatencyRate
	}
	for _, rate := range rates {
		if rep.MaxRateP99 == 0 {
			break
		}
		settle()
		_, p99, err := latency(ctx, filepath.Join(tmp, fmt.Sprintf("latency-%d", rate)), wasm, rate, secs, quiet)
		if err != nil {
			return nil, fmt.Errorf("bench: latency at %d rows/s: %w", rate, err)
		}
		rep.LatencyP99ByRate[fmt.Sprint(rate)] = p99
		logf("latency p99 %.2f ms at %d rows/s", p99, rate)
		if p99 >= 25 {
			break
		}
		rep.MaxRateP99 = rate
	}
	logf("latency: highest rate tried with p99 under 25 ms: %d rows/s", rep.MaxRateP99)

	// 1b. The peer: the same per-key logic as an Extism plugin, one call per group.
	d := 300 * time.Millisecond
	if !opts.Quick {
		d = 2 * time.Second
	}
	extNs, err := extismPerGroup(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("bench: extism: %w", err)
	}
	rep.ExtismNsPerGroup = extNs
	speedup := extNs / rep.InvokeNs["c"]["4096"]
	rep.ExtismSpeedup = &speedup
	logf("extism %-15s %8.0f ns/group (a plugin call per group); groupstate (C, 4096 per call) is %.1fx faster", "c plugin", extNs, speedup)

	// 2. Engine throughput on sessions: each language against native Go.
	rep.Keys, rep.Rows = 100_000, 1_000_000
	if opts.Quick {
		rep.Keys, rep.Rows = 20_000, 100_000
	}
	rep.EngineRowsPerSec = map[string]float64{}
	// native runs as many instances as a module gets by default (limits.instances: the CPUs),
	// each call split among them; native_1 is the single-instance figure.
	for _, kind := range append([]string{"native_1", "native"}, languages...) {
		var wasm []byte
		natives := goruntime.NumCPU()
		switch kind {
		case "native_1":
			natives = 1
		case "native":
		default:
			if wasm, err = module("sessions", kind); err != nil {
				return nil, err
			}
		}
		settle()
		rps, err := engineSessions(ctx, filepath.Join(tmp, "engine-"+kind), wasm, natives, rep.Keys, rep.Rows, quiet)
		if err != nil {
			return nil, fmt.Errorf("bench: engine %s: %w", kind, err)
		}
		rep.EngineRowsPerSec[kind] = rps
		logf("engine %-15s %10.0f rows/s (sessions, %d keys, %d rows)", kind, rps, rep.Keys, rep.Rows)
		if wasm == nil && rps > rep.NativeBestRowsPerSec {
			rep.NativeBaseline, rep.NativeBestRowsPerSec = kind, rps
		}
		if wasm != nil {
			ratio := rps / rep.NativeBestRowsPerSec
			if kind == "go" {
				rep.WasmNativeRatio = ratio
			}
			if ratio > rep.WasmNativeRatioBest {
				rep.WasmNativeRatioBest, rep.BestLanguage = ratio, kind
			}
		}
	}

	// 2b. The same counting per key as an ABI v1 module and as an ABI v2 processor (Go).
	v1Count, err := module("logincount", "go")
	if err != nil {
		return nil, err
	}
	rep.ABIRowsPerSec = map[string]float64{}
	for _, abi := range []struct {
		name string
		wasm []byte
	}{{"v1", v1Count}, {"v2", v2CountModule}} {
		settle()
		rps, err := engineCount(ctx, filepath.Join(tmp, "abi-"+abi.name), abi.wasm, rep.Keys, rep.Rows, quiet)
		if err != nil {
			return nil, fmt.Errorf("bench: counting with ABI %s: %w", abi.name, err)
		}
		rep.ABIRowsPerSec[abi.name] = rps
	}
	rep.ABIv2Ratio = rep.ABIRowsPerSec["v2"] / rep.ABIRowsPerSec["v1"]
	logf("abi    v1 %10.0f rows/s, v2 %10.0f rows/s (%.2fx): the same count per key, state with the group or by a state request (Go, %d keys, %d rows)",
		rep.ABIRowsPerSec["v1"], rep.ABIRowsPerSec["v2"], rep.ABIv2Ratio, rep.Keys, rep.Rows)

	// 2b'. Python: logincount against Go's (the v1 figure above), and the counting as a Python
	// function and as a Python StatefulProcessor (smaller: Python is slower).
	pyCount, err := module("logincount", "python")
	if err != nil {
		return nil, err
	}
	settle()
	pyRPS, err := engineCount(ctx, filepath.Join(tmp, "logincount-python"), pyCount, rep.Keys, rep.Rows, quiet)
	if err != nil {
		return nil, fmt.Errorf("bench: logincount in Python: %w", err)
	}
	rep.LogincountRowsPerSec = map[string]float64{"go": rep.ABIRowsPerSec["v1"], "python": pyRPS}
	rep.PythonGoRatio = pyRPS / rep.ABIRowsPerSec["v1"]
	logf("python logincount %10.0f rows/s, Go %10.0f rows/s (%.2fx; %d keys, %d rows)", pyRPS, rep.ABIRowsPerSec["v1"], rep.PythonGoRatio, rep.Keys, rep.Rows)
	pyKeys, pyRows := 10_000, 100_000
	if opts.Quick {
		pyKeys, pyRows = 4_000, 20_000
	}
	v1, v2, err := pythonABI(ctx, filepath.Join(tmp, "python-abi"), pyKeys, pyRows, quiet)
	if err != nil {
		return nil, fmt.Errorf("bench: Python ABI v2: %w", err)
	}
	rep.PythonABIRowsPerSec = map[string]float64{"v1": v1, "v2": v2}
	rep.PythonABIv2Ratio = v2 / v1
	logf("python abi v1 %10.0f rows/s, v2 %10.0f rows/s (%.2fx): the same count per key, a function or a StatefulProcessor (%d keys, %d rows)",
		v1, v2, rep.PythonABIv2Ratio, pyKeys, pyRows)

	// 2c. A stream-stream join (adjoin): throughput and its state over time.
	rep.JoinAds, rep.JoinRows = 100_000, 1_000_000
	if opts.Quick {
		rep.JoinAds, rep.JoinRows = 20_000, 100_000
	}
	joinWasm, err := module("adjoin", "go")
	if err != nil {
		return nil, err
	}
	joinSpec, err := os.ReadFile(filepath.Join(opts.SamplesDir, "adjoin", "adjoin.yaml"))
	if err != nil {
		return nil, err
	}
	settle()
	if rep.JoinRowsPerSec, rep.JoinState, err = engineJoin(ctx, filepath.Join(tmp, "join"), joinSpec, joinWasm, rep.JoinAds, rep.JoinRows, quiet); err != nil {
		return nil, fmt.Errorf("bench: join: %w", err)
	}
	rep.JoinStateGrowth = joinGrowth(rep.JoinState)
	logf("join   %10.0f rows/s (adjoin, Go, %d ads, %d rows over %s of event time); rows held at 60%%/80%%/100%%: %s (growth %.2f)",
		rep.JoinRowsPerSec, rep.JoinAds, rep.JoinRows, joinSpan, joinHeld(rep.JoinState), rep.JoinStateGrowth)

	// 3. End to end through JetStream, against a raw consume and republish.
	e2eRows := 200_000
	if opts.Quick {
		e2eRows = 30_000
	}
	settle()
	e2e, raw, err := endToEnd(ctx, filepath.Join(tmp, "e2e"), wasm, e2eRows, quiet)
	if err != nil {
		return nil, fmt.Errorf("bench: end to end: %w", err)
	}
	rep.E2ERowsPerSec, rep.RawRowsPerSec = e2e, raw
	rep.E2ERawRatio = e2e / raw
	logf("e2e    %10.0f rows/s groupstate, %10.0f rows/s raw JetStream consume+publish (%d rows)", e2e, raw, e2eRows)
	settle()
	if rep.NATSPubRowsPerSec, rep.NATSConsumeRowsPerSec, err = natsLimits(ctx, filepath.Join(tmp, "limits"), e2eRows, quiet); err != nil {
		return nil, fmt.Errorf("bench: NATS limits: %w", err)
	}
	logf("nats   %10.0f rows/s async publish with message ids, %10.0f rows/s consume acking each (the server alone, %d rows)",
		rep.NATSPubRowsPerSec, rep.NATSConsumeRowsPerSec, e2eRows)
	if rep.NATSPubRowsPerSec > 0 {
		rep.E2ECeilingRatio = e2e / rep.NATSPubRowsPerSec
	}
	logf("e2e    %.2f of the server's own publish ceiling, %.2f of the raw pass-through", rep.E2ECeilingRatio, rep.E2ERawRatio)

	// 4. The cost of replication: changelog, against the same deployment without it.
	settle()
	none, changelog, err := replicationCost(ctx, filepath.Join(tmp, "replication"), wasm, e2eRows, quiet)
	if err != nil {
		return nil, fmt.Errorf("bench: replication: %w", err)
	}
	rep.ReplicationRowsPerSec = map[string]float64{"none": none, "changelog": changelog}
	rep.ChangelogRatio = changelog / none
	logf("replication %6.0f rows/s with changelog, %6.0f rows/s without (%.2fx; %d rows)", changelog, none, rep.ChangelogRatio, e2eRows)

	// 5. Warm restart from the compilation cache.
	goWasm, err := module("sessions", "go")
	if err != nil {
		return nil, err
	}
	ms, err := warmRestart(ctx, filepath.Join(tmp, "cache"), goWasm, quiet)
	if err != nil {
		return nil, fmt.Errorf("bench: warm restart: %w", err)
	}
	rep.WarmRestartMs = ms
	logf("warm restart of the Go sessions module from the compilation cache: %.1f ms", ms)
	// 6. Memory: state of many keys stays on disk.
	rep.MemoryKeys = 10_000_000
	if opts.Quick {
		rep.MemoryKeys = 200_000
	}
	cWasm, err := module("logincount", "c")
	if err != nil {
		return nil, err
	}
	probeRows := 300_000
	if opts.Quick {
		probeRows = 50_000
	}
	settle()
	points, growth, err := memory(ctx, filepath.Join(tmp, "memory"), cWasm, rep.MemoryKeys, probeRows, quiet)
	if err != nil {
		return nil, fmt.Errorf("bench: memory: %w", err)
	}
	rep.Memory, rep.StateRowsPerSec = points, growth
	if len(points) > 1 && points[0].RSSMB > 0 {
		rep.MemoryGrowth = points[len(points)-1].RSSMB / points[0].RSSMB
	}
	for _, p := range points {
		logf("memory %10d keys of state: RSS %.0f MB", p.Keys, p.RSSMB)
	}
	rep.StateGrowthRatio = growth[1].RowsPerSec / growth[0].RowsPerSec
	rep.StateUniformRatio = growth[2].RowsPerSec / growth[0].RowsPerSec
	for _, p := range growth {
		logf("state  %10.0f rows/s on %d active keys with %d keys of state", p.RowsPerSec, p.ActiveKeys, p.Keys)
	}
	logf("state  growth %.2fx (the same working set in more state), %.2fx with all the state working",
		rep.StateGrowthRatio, rep.StateUniformRatio)

	// 7. Timeouts: many keys expiring at once.
	rep.TimeoutKeys = 1_000_000
	if opts.Quick {
		rep.TimeoutKeys = 100_000
	}
	settle()
	tf, err := timeoutsAtOnce(ctx, filepath.Join(tmp, "timeouts"), cWasm, rep.TimeoutKeys, quiet)
	if err != nil {
		return nil, fmt.Errorf("bench: timeouts: %w", err)
	}
	rep.TimeoutCallsPerSec, rep.TimeoutDataCallsPerSec = tf.TimeoutCallsPerSec, tf.DataCallsPerSec
	rep.TimeoutRSSMB, rep.TimeoutFillRSSMB = tf.RSSMB, tf.FillRSSMB
	rep.TimeoutRatio = tf.TimeoutCallsPerSec / tf.DataCallsPerSec
	logf("timeouts %8.0f calls/s firing %d timeouts at once, %.0f data calls/s setting them (%.2fx); RSS at most %.0f MB firing, %.0f MB setting",
		tf.TimeoutCallsPerSec, rep.TimeoutKeys, tf.DataCallsPerSec, rep.TimeoutRatio, tf.RSSMB, tf.FillRSSMB)
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}
