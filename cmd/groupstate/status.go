package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/runtime/client"
)

// newStatusCommand returns `groupstate status`, a deployment's progress.
func newStatusCommand() *cobra.Command {
	var cf connFlags
	var asJSON bool
	var watch time.Duration
	cmd := &cobra.Command{
		Use:   "status NAME [--json] [--watch]",
		Short: "Show a deployment's progress (rows, late rows, dead letters, keys, watermark, lag)",
		Example: `  groupstate status logincount
  groupstate status logincount --json | jq .rows_in
  groupstate status logincount --watch`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := cf.client(cmd, "status")
			if err != nil {
				return err
			}
			defer done()
			var prev *client.Status
			for {
				st, err := c.Status(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(cmd.OutOrStdout())
					if watch == 0 {
						enc.SetIndent("", "  ")
					}
					if err := enc.Encode(st); err != nil {
						return err
					}
				} else {
					if watch > 0 {
						fmt.Fprint(cmd.OutOrStdout(), "\033[H\033[2J") // clear the terminal
					}
					printStatus(cmd.OutOrStdout(), st)
					if prev != nil && !st.UpdatedAt.Equal(prev.UpdatedAt) {
						secs := st.UpdatedAt.Sub(prev.UpdatedAt).Seconds()
						fmt.Fprintf(cmd.OutOrStdout(), "%-20s %.0f rows/s in, %.0f rows/s out\n", "rate:",
							float64(st.RowsIn-prev.RowsIn)/secs, float64(st.Emitted-prev.Emitted)/secs)
					}
				}
				if watch == 0 {
					return nil
				}
				prev = st
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(watch):
				}
			}
		},
	}
	cmd.ValidArgsFunction = cf.completeNames(1)
	cf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON (one object a line with --watch)")
	cmd.Flags().DurationVar(&watch, "watch", 0, "refresh every second (or --watch=5s) until interrupted")
	cmd.Flags().Lookup("watch").NoOptDefVal = "1s"
	return cmd
}

// printStatus writes st to w as aligned "name: value" lines.
func printStatus(w io.Writer, st *client.Status) {
	line := func(k string, v any) { fmt.Fprintf(w, "%-20s %v\n", k+":", v) }
	line("deployment", st.Name)
	line("state", st.ShownState(time.Now()))
	if st.Error != "" {
		line("error", st.Error)
	}
	if st.LastError != "" && st.LastError != st.Error {
		line("last error", fmt.Sprintf("%s (%s)", st.LastError, st.LastErrorAt.Local().Format(time.DateTime)))
	}
	if st.Isolating != "" {
		line("isolating", st.Isolating)
	}
	if st.ModuleDigest != "" {
		line("module sha256", st.ModuleDigest)
	}
	if st.ShadowOf != "" {
		line("shadow of", st.ShadowOf+" (position and lag count its batches)")
	}
	if st.Owner != "" {
		line("runtime", st.Owner)
	}
	line("rows in", st.RowsIn)
	line("rows out", st.Emitted)
	line("late rows dropped", st.LateRows)
	line("dead letters", st.DeadLetters)
	line("timeouts fired", st.TimeoutsFired)
	if st.TTLExpired > 0 {
		line("ttl expired", st.TTLExpired)
	}
	line("keys with state", st.StateKeys)
	line("keys with timeout", st.TimerKeys)
	line("batches", st.Batches)
	line("last batch", fmt.Sprintf("#%d, %.2f ms", st.LastBatchID, st.LastBatchMs))
	if st.WatermarkMs > 0 {
		wm := time.UnixMilli(st.WatermarkMs).UTC()
		line("watermark", fmt.Sprintf("%d (%s, %s behind)", st.WatermarkMs, wm.Format(time.RFC3339), time.Since(wm).Round(time.Second)))
	}
	if len(st.Partitions) <= 1 {
		line("input position", st.Position) // with partitions: each one's, below
	}
	line("input lag", fmt.Sprintf("%d messages", st.InputLag))
	if !st.UpdatedAt.IsZero() {
		line("updated", st.UpdatedAt.Local().Format(time.DateTime))
	}
	if len(st.Inputs) > 0 {
		fmt.Fprintf(w, "\n%-20s %-12s %-12s %-10s %s\n", "INPUT", "ROWS IN", "LATE", "LAG", "WATERMARK")
		for _, in := range st.Inputs {
			fmt.Fprintf(w, "%-20s %-12d %-12d %-10d %d\n", in.Name, in.RowsIn, in.LateRows, in.Lag, in.WatermarkMs)
		}
	}
	if st.QuarantinedKeys > 0 {
		fmt.Fprintf(w, "\n%d quarantined keys (their rows go to the dead-letter stream without a call until the next deploy):\n", st.QuarantinedKeys)
		fmt.Fprintf(w, "%-24s %-24s %s\n", "KEY", "SINCE", "LAST ERROR")
		for _, q := range st.Quarantined {
			fmt.Fprintf(w, "%-24s %-24s %s\n", string(q.Key), time.UnixMilli(q.SinceMs).UTC().Format(time.RFC3339), q.Reason)
		}
		if n := st.QuarantinedKeys - len(st.Quarantined); n > 0 {
			fmt.Fprintf(w, "... and %d more\n", n)
		}
	}
	if len(st.Partitions) > 1 {
		fmt.Fprintf(w, "\n%-10s %-18s %-10s %s\n", "PARTITION", "RUNTIME", "POSITION", "LAG")
		for _, p := range st.Partitions {
			fmt.Fprintf(w, "%-10d %-18s %-10d %d\n", p.Partition, cmp.Or(p.Owner, "-"), p.Position, p.Lag)
		}
	}
}
