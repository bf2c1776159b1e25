package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/runtime/bench"
)

// newBenchCommand returns `groupstate bench`, which measures the performance targets.
func newBenchCommand() *cobra.Command {
	var quick, asJSON bool
	var samples string
	cmd := &cobra.Command{
		Use:   "bench [--quick] [--json]",
		Short: "Measure groupstate against its performance targets and peers, side by side in one run",
		Long: `Measures, in one process and one run: the cost per key group of guest calls in every
sample language; engine throughput on the sessions sample, WASM against the same logic
compiled natively (its best run); ABI v2 against ABI v1; a stream-stream join; end-to-end
throughput through an embedded JetStream with file storage against a raw consume-and-republish
and against the server's own publish ceiling; publish-to-output latency; replication; the warm
restart of a module from the compilation cache; memory and state growth; timeouts at once; per
language the start of an instance and its memory; and Python's logincount against Go's.
Progress goes to standard error; with --json
the last line of standard output is one JSON object with the figures.`,
		Example: `  groupstate bench --quick
  groupstate bench --json | tail -1 | jq .wasm_native_ratio`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := bench.Run(cmd.Context(), bench.Options{Quick: quick, SamplesDir: samples, Progress: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			if asJSON {
				b, _ := json.Marshal(rep)
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return nil
			}
			out := cmd.OutOrStdout()
			// The targets are docs/performance.md's (issue 32's round three).
			fmt.Fprintf(out, "wasm_native_ratio   %.2f   (target >= 0.75; the Go module vs the same Go code native, its best run: %s, %.0f rows/s)\n",
				rep.WasmNativeRatio, rep.NativeBaseline, rep.NativeBestRowsPerSec)
			fmt.Fprintf(out, "  best language     %.2f   (%s; target C >= 0.95, Rust and AssemblyScript >= 0.85)\n", rep.WasmNativeRatioBest, rep.BestLanguage)
			fmt.Fprintf(out, "e2e_ceiling_ratio   %.2f   (target >= 0.8; %.0f rows/s vs the server's own publish ceiling, %.0f)\n",
				rep.E2ECeilingRatio, rep.E2ERowsPerSec, rep.NATSPubRowsPerSec)
			fmt.Fprintf(out, "e2e_raw_ratio       %.2f   (vs the raw pass-through, %.0f rows/s)\n", rep.E2ERawRatio, rep.RawRowsPerSec)
			fmt.Fprintf(out, "invoke_ns_per_group %.0f   (target <= 250, C; Go %.0f, target <= 2000)\n", rep.InvokeNsPerGroup, rep.InvokeNs["go"]["4096"])
			fmt.Fprintf(out, "latency p99         %.1f ms (target <= 5 ms at 10k rows/s; under 25 ms up to %d rows/s, target >= 60000)\n", rep.LatencyP99Ms, rep.MaxRateP99)
			fmt.Fprintf(out, "state_growth_ratio  %.2f   (target >= 0.8; 100k active keys in %d keys of state vs alone)\n", rep.StateGrowthRatio, rep.MemoryKeys)
			fmt.Fprintf(out, "timeout_ratio       %.2f   (target >= 0.5; %d timeouts at once; RSS %.0f MB firing, %.0f MB setting)\n",
				rep.TimeoutRatio, rep.TimeoutKeys, rep.TimeoutRSSMB, rep.TimeoutFillRSSMB)
			fmt.Fprintf(out, "memory_growth       %.2f   (target flat, 1.0; RSS at %d keys over at a tenth of them)\n", rep.MemoryGrowth, rep.MemoryKeys)
			fmt.Fprintf(out, "warm restart        %.1f ms (target < 50 ms)\n", rep.WarmRestartMs)
			fmt.Fprintf(out, "abi_v2_ratio        %.2f   (target >= 0.8; ABI v2 processor vs ABI v1 module, the same count per key; %.0f vs %.0f rows/s)\n",
				rep.ABIv2Ratio, rep.ABIRowsPerSec["v2"], rep.ABIRowsPerSec["v1"])
			fmt.Fprintf(out, "join_rows_per_sec   %.0f   (target >= 50000; adjoin, Go, %d ads, %d rows; state growth %.2f, target about 1)\n",
				rep.JoinRowsPerSec, rep.JoinAds, rep.JoinRows, rep.JoinStateGrowth)
			fmt.Fprintf(out, "python_go_ratio     %.2f   (target >= 0.3; logincount in Python vs Go, %.0f vs %.0f rows/s)\n",
				rep.PythonGoRatio, rep.LogincountRowsPerSec["python"], rep.LogincountRowsPerSec["go"])
			fmt.Fprintf(out, "python start        %.1f ms (target <= 100 ms; warm compilation cache; one more instance %.1f ms)\n",
				rep.WarmStartMs["python"], rep.InstanceStartMs["python"])
			fmt.Fprintf(out, "python memory       %.1f MB (target <= 32 MB per instance)\n", rep.InstanceMemoryMB["python"])
			fmt.Fprintf(out, "python_abi_v2_ratio %.2f   (a StatefulProcessor vs a function, the same count per key; %.0f vs %.0f rows/s)\n",
				rep.PythonABIv2Ratio, rep.PythonABIRowsPerSec["v2"], rep.PythonABIRowsPerSec["v1"])
			if rep.ExtismSpeedup != nil {
				fmt.Fprintf(out, "extism_speedup      %.1fx (target >= 10x)\n", *rep.ExtismSpeedup)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "small sizes (about a minute)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the figures as one JSON object on the last line")
	cmd.Flags().StringVar(&samples, "samples", "samples", "the samples folder with the modules to measure")
	return cmd
}
