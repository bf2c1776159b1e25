package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/replay"
	"github.com/groupstate/groupstate/runtime/spec"
)

// maxShownKeys is how many keys' first differences replay prints (--json has them all).
const maxShownKeys = 20

// replayFlags are groupstate replay's flags.
type replayFlags struct {
	module, spec string
	keys         []string
	from, to     uint64
	since        time.Duration
	asJSON       bool
}

// newReplayCommand returns `groupstate replay`.
func newReplayCommand() *cobra.Command {
	var cf connFlags
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay NAME --module NEW.wasm [--spec SPEC]",
		Short: "Run a deployment's recorded history against a module and compare the outputs",
		Long: `Runs the batches the deployment recorded (their rows fetched from the input stream by
sequence, at their recorded processing time and watermark) against the module, from empty
state (or the deployment's initial state), in an isolated store, and compares its outputs with
the ones the deployment published, batch by batch and key by key. The running deployment is
not touched. --from, --to and --since bound the batches compared (the ones before still run,
to make their state). --key limits the comparison to some keys (taken as JSON when they are a
JSON number or string, else as strings).

--spec SPEC runs with that spec's config and limits instead of the deployment's, for example
a longer session gap: it must read the deployment's input (the same subjects, partitions and
key split); its name and outputs are not used, and its module is the one replayed when
--module is not given. The batches still run at their recorded processing times and
watermarks, so its event-time settings (watermark_delay) change nothing.

Exit status: 0 when the outputs are the same, 1 when they differ, 2 on errors.`,
		Example: `  groupstate replay logincount --module fixed.wasm
  groupstate replay logincount --module fixed.wasm --key alice --since 24h
  groupstate replay sessions --spec sessions-gap10s.yaml
  groupstate replay logincount --module fixed.wasm --json > diff.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := runReplay(cmd, &cf, args[0], f)
			var ex *exitError
			if err != nil && !errors.As(err, &ex) {
				return &exitError{code: 2, msg: "groupstate: " + userMessage(err)}
			}
			return err
		},
	}
	cmd.ValidArgsFunction = cf.completeNames(1)
	cf.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.module, "module", "", "the module to replay with (.wasm); required unless --spec names one")
	fl.StringVarP(&f.spec, "spec", "f", "", "run with this spec's config and limits (same input as the deployment)")
	fl.StringArrayVar(&f.keys, "key", nil, "compare only this key (repeatable)")
	fl.Uint64Var(&f.from, "from", 0, "compare batches from this batch id on")
	fl.Uint64Var(&f.to, "to", 0, "compare batches up to this batch id")
	fl.DurationVar(&f.since, "since", 0, "compare the batches of this last span of processing time (24h, 30m)")
	fl.BoolVar(&f.asJSON, "json", false, "print the whole report, every difference, as JSON")
	cmd.MarkFlagsOneRequired("module", "spec")
	cmd.MarkFlagsMutuallyExclusive("from", "since")
	return cmd
}

func runReplay(cmd *cobra.Command, cf *connFlags, name string, f replayFlags) error {
	var alt *spec.Spec
	var wasm []byte
	var err error
	if f.spec != "" {
		alt, wasm, err = loadSpecAndModule(f.spec, f.module)
	} else {
		wasm, err = os.ReadFile(f.module)
	}
	if err != nil {
		return err
	}
	module := f.module
	if module == "" {
		module = alt.Module
	}
	c, done, err := cf.client(cmd, "replay")
	if err != nil {
		return err
	}
	defer done()
	d, err := c.Get(cmd.Context(), name)
	if err != nil {
		return err
	}
	run := d.RunSpec()
	if alt != nil {
		if run, err = replaySpec(alt, run); err != nil {
			return err
		}
	}
	opts := replay.Options{JS: c.JetStream(), Spec: run, InputOf: d.InputOf, Module: wasm, FromBatch: f.from, ToBatch: f.to, Since: f.since,
		Progress: progressLine(cmd.ErrOrStderr(), "batch"), CacheDir: defaultCacheDir()}
	opts.Keys = keyArgs(f.keys)
	initial, err := c.InitialState(cmd.Context(), d)
	if err != nil {
		return err
	}
	if initial != nil {
		if opts.InitialState, err = engine.ParseInitialState(bytes.NewReader(initial)); err != nil {
			return fmt.Errorf("%s's initial state: %w", name, err)
		}
	}
	rep, err := replay.Run(cmd.Context(), opts)
	if err != nil {
		return err
	}
	return finishReport(cmd.OutOrStdout(), f.asJSON, rep, func(w io.Writer) { printReplay(w, name, module, rep) })
}

// replaySpec is the spec replay --spec runs with: alt, checked against the deployment's run
// spec, with the deployment's name, input and outputs (where its history and its published
// outputs are).
func replaySpec(alt, run *spec.Spec) (*spec.Spec, error) {
	if err := alt.CheckReplayOf(run); err != nil {
		return nil, err
	}
	c := *alt
	c.Name, c.Input, c.Output, c.DeadLetter, c.Late = run.Name, run.Input, run.Output, run.DeadLetter, run.Late
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("the replay spec with %s's name, input and outputs: %w", run.Name, err)
	}
	return &c, nil
}

// keyArgs makes --key arguments keys (see client.KeyFromArg).
func keyArgs(args []string) [][]byte {
	var keys [][]byte
	for _, k := range args {
		keys = append(keys, client.KeyFromArg(k))
	}
	return keys
}

// finishReport prints rep to w, as JSON with asJSON, else with printText, and returns the
// exit status 1 when it found differences.
func finishReport(w io.Writer, asJSON bool, rep *replay.Report, printText func(io.Writer)) error {
	if asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(w, string(b))
	} else {
		printText(w)
	}
	if !rep.Same() {
		return &exitError{code: 1}
	}
	return nil
}

// printReplay prints the summary of rep and the first difference of each key.
func printReplay(w io.Writer, name, module string, rep *replay.Report) {
	fmt.Fprintf(w, "replayed %d batches (%d input rows) of %s with %s; compared %d batches, %d keys\n",
		rep.Batches, rep.Rows, name, module, rep.Compared, rep.Keys)
	for _, st := range rep.FromSnapshots {
		fmt.Fprintf(w, "partition %d started from the snapshot of its state after batch %d (taken %s)\n", st.Partition, st.Batch, st.TakenAt.Local().Format(time.DateTime))
	}
	printReport(w, rep)
}

// printReport prints rep's counts of output rows and the first difference of each key (the
// lines after printReplay's and printDiff's headers).
func printReport(w io.Writer, rep *replay.Report) {
	fmt.Fprintf(w, "output rows: %d equal, %d changed, %d only old, %d only new\n", rep.Equal, rep.Changed, rep.OnlyOld, rep.OnlyNew)
	if rep.Same() {
		fmt.Fprintln(w, "same outputs")
		return
	}
	shown := map[string]bool{}
	fmt.Fprintln(w, "first difference of each key:")
	for _, d := range rep.Differences {
		if shown[string(d.Key)] {
			continue
		}
		if len(shown) == maxShownKeys {
			fmt.Fprintf(w, "  ... more keys differ: --json lists every difference\n")
			break
		}
		shown[string(d.Key)] = true
		fmt.Fprintf(w, "  key %s, batch %d (partition %d):\n    old: %s\n    new: %s\n", d.Key, d.Batch, d.Partition, rowsText(d.Old), rowsText(d.New))
	}
}

// rowsText joins rows for printing; "(none)" when there are none.
func rowsText(rows []json.RawMessage) string {
	if len(rows) == 0 {
		return "(none)"
	}
	b, _ := json.Marshal(rows)
	return string(b)
}

// progressLine returns a progress callback for w. On a terminal it rewrites one line ("batch
// 120 of 4000") at most five times a second and ends it when done reaches total; elsewhere (a
// log file, a CI job) it prints a line every 10 seconds and the last one, so that the log
// holds lines rather than carriage returns.
func progressLine(w io.Writer, what string) func(done, total int) {
	every, prefix, end := 200*time.Millisecond, "\r", ""
	if !isTerminal(w) {
		every, prefix, end = 10*time.Second, "", "\n"
	}
	last := time.Now()
	return func(done, total int) {
		if done < total && time.Since(last) < every {
			return
		}
		last = time.Now()
		fmt.Fprintf(w, "%s%s %d of %d%s", prefix, what, done, total, end)
		if done == total && end == "" {
			fmt.Fprintln(w)
		}
	}
}

// isTerminal tells whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
