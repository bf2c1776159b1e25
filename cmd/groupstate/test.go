package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/scenario"
)

// newTestCommand returns `groupstate test`, which runs a scenario file against a handler.
func newTestCommand() *cobra.Command {
	var specPath, scenarioPath, modulePath, initialPath string
	var verbose, asJSON bool
	cacheDir := defaultCacheDir()
	cmd := &cobra.Command{
		Use:   "test --spec SPEC --scenario FILE [--module WASM] [--initial-state FILE] [--json]",
		Short: "Run a scenario file against a handler, with no NATS and no wall clock",
		Long: `Runs the steps of a scenario file (JSON Lines) against the deployment's module and
prints every emitted row to standard output as one compact JSON line, in emission order.
Exits 0 when every expect step holds, non-zero with a readable diff otherwise.

Steps:
  {"at": 12000, "rows": [{...}]}   a micro-batch at processing time 12000 ms
  {"restart": true}                 close everything and reopen from the same state
  {"drain": true}                   the last batch: fire every timeout, then stop (only
                                    expect steps may follow)
  {"expect": [{...}]}               rows emitted since the previous expect (any order)

--initial-state FILE (JSON Lines of {"key": K, "state": V}) is applied in the first batch:
each key's data call starts from its state, and keys without rows there are called with none
(docs/semantics.md, "transformWithState handlers", rule 8).

--json prints, instead of the rows, one JSON object: the scenario, whether it passed, the
batches run, the expectations held, the rows emitted and, when it failed, why; also when it
cannot run at all (a bad spec, module or scenario line), so a script always gets one object.`,
		Example: `  groupstate test --spec samples/logincount/logincount.yaml \
    --scenario samples/logincount/logincount.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rows := &lineCounter{w: cmd.OutOrStdout()}
			if asJSON {
				rows.w = io.Discard
			}
			sum, err := runTestScenario(cmd, testInputs{specPath, scenarioPath, modulePath, initialPath, cacheDir, verbose}, rows)
			if asJSON {
				// One object whatever went wrong, so that a script always has one to read.
				res := testResult{Scenario: filepath.Base(scenarioPath), Pass: err == nil, Batches: sum.Batches, Expectations: sum.Expectations, Rows: rows.lines}
				if err != nil {
					res.Batches, res.Expectations = 0, 0 // not known to have run
					res.Error = userMessage(err)
				}
				if jerr := json.NewEncoder(cmd.OutOrStdout()).Encode(res); jerr != nil {
					return jerr
				}
			}
			if errors.Is(err, scenario.ErrExpectation) {
				return &exitError{code: 1, msg: err.Error()}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "PASS %s: %d batches, %d expectations held\n", filepath.Base(scenarioPath), sum.Batches, sum.Expectations)
			return nil
		},
	}
	cmd.Flags().StringVar(&specPath, "spec", "", "deployment spec (YAML)")
	cmd.Flags().StringVar(&scenarioPath, "scenario", "", "scenario file (JSON Lines)")
	cmd.Flags().StringVar(&modulePath, "module", "", "module to run instead of the spec's module")
	cmd.Flags().StringVar(&initialPath, "initial-state", "", "initial state to apply in the first batch (JSON Lines of {\"key\": K, \"state\": V})")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print dead letters, late rows and the module's own output to standard error")
	cmd.Flags().StringVar(&cacheDir, "cache-dir", cacheDir, "compilation cache directory (empty: none)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON summary (pass or fail, counts, why) instead of the rows")
	_ = cmd.MarkFlagRequired("spec")
	_ = cmd.MarkFlagRequired("scenario")
	return cmd
}

// testInputs are test's flags.
type testInputs struct {
	specPath, scenarioPath, modulePath, initialPath, cacheDir string
	verbose                                                   bool
}

// runTestScenario runs the scenario of in, writing its rows to rows.
func runTestScenario(cmd *cobra.Command, in testInputs, rows io.Writer) (scenario.Summary, error) {
	sp, wasm, err := loadSpecAndModule(in.specPath, in.modulePath)
	if err != nil {
		return scenario.Summary{}, err
	}
	var initial *engine.InitialState
	if in.initialPath != "" {
		if initial, err = readInitialState(in.initialPath); err != nil {
			return scenario.Summary{}, err
		}
	}
	f, err := os.Open(in.scenarioPath)
	if err != nil {
		return scenario.Summary{}, err
	}
	defer f.Close()
	rt, err := engine.New(engine.Options{CacheDir: in.cacheDir, Logger: quietLogger(cmd.ErrOrStderr())})
	if err != nil {
		return scenario.Summary{}, err
	}
	defer rt.Close(cmd.Context())
	opts := scenario.Options{Spec: sp, Wasm: wasm, Out: rows, Runtime: rt, Logger: quietLogger(cmd.ErrOrStderr()), InitialState: initial}
	if in.verbose {
		opts.Log = cmd.ErrOrStderr()
		opts.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	// A file is read twice (checked, then run a step at a time), so that the
	// scenario's length and number of keys take no memory.
	return scenario.RunSummary(cmd.Context(), opts, f)
}

// testResult is what test --json prints.
type testResult struct {
	Scenario string `json:"scenario"`
	Pass     bool   `json:"pass"`
	// Batches and Expectations count the scenario's batch and expect steps, when it passed.
	Batches      int `json:"batches"`
	Expectations int `json:"expectations"`
	// Rows counts the rows emitted.
	Rows  int    `json:"rows"`
	Error string `json:"error,omitempty"`
}

// lineCounter counts the lines written through it to w.
type lineCounter struct {
	w     io.Writer
	lines int
}

func (l *lineCounter) Write(p []byte) (int, error) {
	l.lines += bytes.Count(p, []byte{'\n'})
	return l.w.Write(p)
}

// readInitialState parses the initial-state file at path.
func readInitialState(path string) (*engine.InitialState, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := engine.ParseInitialState(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
