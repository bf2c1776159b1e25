package main

import (
	"errors"
	"fmt"
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
	var verbose bool
	cacheDir := defaultCacheDir()
	cmd := &cobra.Command{
		Use:   "test --spec SPEC --scenario FILE [--module WASM] [--initial-state FILE]",
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
(docs/semantics.md, "transformWithState handlers", rule 8).`,
		Example: `  groupstate test --spec samples/logincount/logincount.yaml \
    --scenario samples/logincount/logincount.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sp, wasm, err := loadSpecAndModule(specPath, modulePath)
			if err != nil {
				return err
			}
			var initial *engine.InitialState
			if initialPath != "" {
				if initial, err = readInitialState(initialPath); err != nil {
					return err
				}
			}
			f, err := os.Open(scenarioPath)
			if err != nil {
				return err
			}
			defer f.Close()
			rt, err := engine.New(engine.Options{CacheDir: cacheDir, Logger: quietLogger(cmd.ErrOrStderr())})
			if err != nil {
				return err
			}
			defer rt.Close(cmd.Context())
			opts := scenario.Options{Spec: sp, Wasm: wasm, Out: cmd.OutOrStdout(), Runtime: rt, Logger: quietLogger(cmd.ErrOrStderr()), InitialState: initial}
			if verbose {
				opts.Log = cmd.ErrOrStderr()
				opts.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			}
			steps, err := scenario.Parse(f)
			if err != nil {
				return err
			}
			err = scenario.RunSteps(cmd.Context(), opts, steps)
			if errors.Is(err, scenario.ErrExpectation) {
				return &exitError{code: 1, msg: err.Error()}
			}
			if err != nil {
				return err
			}
			batches, expects := 0, 0
			for _, st := range steps {
				switch {
				case st.At != nil || st.Drain:
					batches++
				case !st.Restart:
					expects++ // the one other kind of step
				}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "PASS %s: %d batches, %d expectations held\n", filepath.Base(scenarioPath), batches, expects)
			return nil
		},
	}
	cmd.Flags().StringVar(&specPath, "spec", "", "deployment spec (YAML)")
	cmd.Flags().StringVar(&scenarioPath, "scenario", "", "scenario file (JSON Lines)")
	cmd.Flags().StringVar(&modulePath, "module", "", "module to run instead of the spec's module")
	cmd.Flags().StringVar(&initialPath, "initial-state", "", "initial state to apply in the first batch (JSON Lines of {\"key\": K, \"state\": V})")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print dead letters, late rows and the module's own output to standard error")
	cmd.Flags().StringVar(&cacheDir, "cache-dir", cacheDir, "compilation cache directory (empty: none)")
	_ = cmd.MarkFlagRequired("spec")
	_ = cmd.MarkFlagRequired("scenario")
	return cmd
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
