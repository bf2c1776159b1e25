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
compiled natively; end-to-end throughput through an embedded JetStream with file storage
against a raw consume-and-republish; publish-to-output latency at 10k rows/s; the warm
restart of a module from the compilation cache, and per language the start of an instance and
its memory; and Python's logincount against Go's. Progress goes to standard error; with --json
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
			// The targets are docs/performance.md's (issue 16's round).
			fmt.Fprintf(out, "wasm_native_ratio   %.2f   (target >= 0.6; the Go module vs the same Go code native, equal parallelism)\n", rep.WasmNativeRatio)
			fmt.Fprintf(out, "  best language     %.2f   (%s)\n", rep.WasmNativeRatioBest, rep.BestLanguage)
			fmt.Fprintf(out, "e2e_raw_ratio       %.2f   (target >= 0.7; %.0f vs %.0f rows/s)\n", rep.E2ERawRatio, rep.E2ERowsPerSec, rep.RawRowsPerSec)
			fmt.Fprintf(out, "invoke_ns_per_group %.0f   (target <= 500, C; Go %.0f, target <= 3000)\n", rep.InvokeNsPerGroup, rep.InvokeNs["go"]["4096"])
			fmt.Fprintf(out, "latency p99         %.1f ms (target < 10 ms at 10k rows/s; under 25 ms up to %d rows/s, target >= 30000)\n", rep.LatencyP99Ms, rep.MaxRateP99)
			fmt.Fprintf(out, "state_growth_ratio  %.2f   (target >= 0.7; 100k active keys in %d keys of state vs alone)\n", rep.StateGrowthRatio, rep.MemoryKeys)
			fmt.Fprintf(out, "timeout_ratio       %.2f   (target >= 0.5; %d timeouts at once; RSS %.0f MB firing, %.0f MB setting)\n",
				rep.TimeoutRatio, rep.TimeoutKeys, rep.TimeoutRSSMB, rep.TimeoutFillRSSMB)
			fmt.Fprintf(out, "memory_growth       %.2f   (target flat, 1.0; RSS at %d keys over at a tenth of them)\n", rep.MemoryGrowth, rep.MemoryKeys)
			fmt.Fprintf(out, "warm restart        %.1f ms (target < 100 ms)\n", rep.WarmRestartMs)
			fmt.Fprintf(out, "abi_v2_ratio        %.2f   (ABI v2 processor vs ABI v1 module, the same count per key; %.0f vs %.0f rows/s)\n",
				rep.ABIv2Ratio, rep.ABIRowsPerSec["v2"], rep.ABIRowsPerSec["v1"])
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
