package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/runtime/client"
)

// newDeployCommand returns `groupstate deploy`, which validates a spec and module and stores them in NATS.
func newDeployCommand() *cobra.Command {
	var cf connFlags
	var specPath, modulePath, initialPath, shadowOf string
	var wait bool
	var waitTimeout time.Duration
	var resetState, confirm, asJSON bool
	cmd := &cobra.Command{
		Use:   "deploy -f SPEC|SPEC [--module WASM] [--initial-state FILE] [--reset-state --confirm] [--shadow PRIMARY] [--wait=false] [--timeout D] [--json]",
		Short: "Validate and deploy a handler (redeploying a name replaces the module and keeps state)",
		Long: `Validates the spec and the module (the module is compiled and initialized with the spec's
config, so one that would fail at start is refused now), stores both in NATS, and the runtimes
start it. Redeploying a name replaces the module and keeps the deployment's state.

deploy then waits, printing what for, until a runtime runs the new revision (--timeout, 2m
by default); with --wait=false only until the deployment's input streams exist. Either way,
when it exits 0 a row published at once (core NATS or JetStream) is kept and processed. A
revision that fails to start makes deploy fail with the runtime's reason.

--reset-state --confirm empties the deployment's state instead: every key, timeout and output
not yet delivered is dropped, and the deployment goes on from empty state at the input
position (the rows after the last one acknowledged). It is the way out when status says
orphaned (the runtime that held the state lost its data directory): a runtime that is up
then takes the deployment. It cannot be undone.

--initial-state FILE starts a new deployment from a state per key (JSON Lines of
{"key": K, "state": V}): each partition applies its keys in its first batch, a key with rows
starting from its state, a key without called once with no rows. It is for a new deployment
only (a redeploy keeps the state the deployment has); the runtime applies it to a keyspace that
has committed nothing, so a name undeployed before, whose state stays on its runtime, resumes
that state instead: deploy under a new name.

--shadow PRIMARY deploys the spec (under its own name) as a shadow of the deployment PRIMARY:
it runs PRIMARY's recorded batches again, live, from PRIMARY's first recorded batch (the same
rows, processing time and watermark), with its own module, state and consumer, and publishes
on its spec's subjects, those that are PRIMARY's with ".shadow" appended. PRIMARY is not
touched. Compare them with groupstate diff PRIMARY NAME; make the shadow the primary with
groupstate promote NAME.`,
		Example: `  groupstate deploy -f samples/logincount/logincount.yaml
  groupstate deploy -f my.yaml --module build/handler.wasm
  groupstate deploy -f my.yaml --initial-state carts-initial.jsonl
  groupstate deploy -f my.yaml --reset-state --confirm
  groupstate deploy -f logincount-v2.yaml --module fixed.wasm --shadow logincount`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 1 && specPath != "":
				return fmt.Errorf("give the spec once: -f %s or %s", specPath, args[0])
			case len(args) == 1:
				specPath = args[0]
			case specPath == "":
				return fmt.Errorf("which spec? groupstate deploy -f SPEC (or groupstate deploy SPEC)")
			}
			if confirm && !resetState {
				return fmt.Errorf("--confirm confirms --reset-state, which is not given")
			}
			if resetState && !confirm {
				return fmt.Errorf("--reset-state drops the deployment's state for good (every key, timeout and undelivered output); add --confirm to do it")
			}
			sp, wasm, err := loadSpecAndModule(specPath, modulePath)
			if err != nil {
				return err
			}
			c, done, err := cf.client(cmd, "deploy")
			if err != nil {
				return err
			}
			defer done()
			var opts []client.DeployOption
			if resetState {
				opts = append(opts, client.ResetState())
			}
			if shadowOf != "" {
				opts = append(opts, client.AsShadowOf(shadowOf))
			}
			if initialPath != "" {
				if resetState {
					return fmt.Errorf("--initial-state starts a new deployment, --reset-state empties one that exists: give one of them")
				}
				data, err := os.ReadFile(initialPath)
				if err != nil {
					return err
				}
				opts = append(opts, client.WithInitialState(data))
			}
			d, err := c.Deploy(cmd.Context(), sp, wasm, opts...)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				out = io.Discard // one object at the end instead
			}
			// No revision here: the registry's revision counts every record of the bucket, so a
			// first deploy could say "revision 10"; list --json has it.
			fmt.Fprintf(out, "deployed %s (module sha256 %s, %d bytes)\n", d.Name, d.ModuleDigest, d.ModuleSize)
			if d.ShadowOf != "" {
				fmt.Fprintf(out, "a shadow of %s: it runs %s's batches again from its first recorded one, and publishes on %s\n"+
					"compare: groupstate diff %s %s; promote: groupstate promote %s\n",
					d.ShadowOf, d.ShadowOf, d.RunSpec().Output.Subject, d.ShadowOf, d.Name, d.Name)
			}
			if initialPath != "" {
				fmt.Fprintf(out, "its initial state (%s) is applied in its first batch\n", initialPath)
			}
			if d.ResetState {
				fmt.Fprintf(out, "its state will be reset when a runtime takes the deploy (groupstate status %s shows it running again)\n", d.Name)
			}
			wctx, cancel := context.WithTimeout(cmd.Context(), waitTimeout)
			defer cancel()
			err = c.WaitReady(wctx, d, wait, func(what string) { fmt.Fprintf(cmd.ErrOrStderr(), "waiting for %s...\n", what) })
			if asJSON {
				res := deployResult{Name: d.Name, Revision: d.Revision, ModuleDigest: d.ModuleDigest, ModuleSize: d.ModuleSize, ShadowOf: d.ShadowOf,
					ResetState: d.ResetState, Streams: c.Streams(cmd.Context(), d), Ready: err == nil, Running: err == nil && wait}
				if err != nil {
					res.Error = userMessage(err)
				}
				if jerr := json.NewEncoder(cmd.OutOrStdout()).Encode(res); jerr != nil {
					return jerr
				}
			}
			if err != nil {
				return err
			}
			if wait {
				fmt.Fprintf(out, "%s is running\n", d.Name)
			} else {
				fmt.Fprintf(out, "%s's input streams exist: rows published now are kept\n", d.Name)
			}
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVarP(&specPath, "file", "f", "", "deployment spec (YAML)")
	cmd.Flags().StringVar(&modulePath, "module", "", "module to deploy instead of the spec's module")
	cmd.Flags().BoolVar(&resetState, "reset-state", false, "drop the deployment's state and start from empty state at the input position (needs --confirm)")
	cmd.Flags().BoolVar(&confirm, "confirm", false, "confirm --reset-state")
	cmd.Flags().StringVar(&shadowOf, "shadow", "", "deploy as a shadow of this deployment (its batches run again, outputs on <subject>.shadow)")
	cmd.Flags().StringVar(&initialPath, "initial-state", "", "a new deployment's initial state (JSON Lines of {\"key\": K, \"state\": V}), applied in its first batch")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until a runtime runs the deployment (false: only until its input streams exist)")
	cmd.Flags().DurationVar(&waitTimeout, "timeout", 2*time.Minute, "how long to wait (the deployment stays deployed when the wait gives up)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON object (also when the wait fails)")
	return cmd
}

// deployResult is what deploy --json prints.
type deployResult struct {
	Name         string                   `json:"name"`
	Revision     uint64                   `json:"revision"`
	ModuleDigest string                   `json:"module_digest"`
	ModuleSize   int64                    `json:"module_size"`
	ShadowOf     string                   `json:"shadow_of,omitempty"`
	ResetState   bool                     `json:"reset_state,omitempty"`
	Streams      client.DeploymentStreams `json:"streams"`
	// Ready: rows published now are kept and processed (its input streams exist, and with
	// --wait a runtime runs it); Running: a runtime runs this revision.
	Ready   bool   `json:"ready"`
	Running bool   `json:"running"`
	Error   string `json:"error,omitempty"`
}

// newUndeployCommand returns `groupstate undeploy`, which stops a deployment and keeps its
// state, or with --purge deletes everything it created.
func newUndeployCommand() *cobra.Command {
	var cf connFlags
	var drain, purge, yes, asJSON bool
	var drainTimeout, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "undeploy NAME [--drain] [--purge [--yes]] [--json]",
		Short: "Stop a deployment (its state stays on disk; deploying the name again resumes it; --purge deletes it all)",
		Long: `Stops the deployment on the runtimes; its state stays where it is, and deploying the name
again resumes it.

--drain first runs the deployment's last batch, as Flink's stop --drain does: each partition
finishes the batch in flight, stops reading input, fires every timeout its keys hold as if
time and the watermark had passed them, and publishes what those calls emit; then the
deployment is undeployed. Stop the producers and wait for lag 0 (groupstate status) first:
rows that arrive after a partition drained stay in the input stream, not run.

--purge also deletes everything the deployment created, for good: it undeploys, waits until
the runtimes stopped it (--timeout), then deletes the state each live runtime holds of it, its
streams (input, partitioned, inputs, output, dead-letter, late, changelog, manifests) with
their messages, its changelog snapshots, its consumers on the streams it keeps, and its KV
entries (record and history, status, owner, leases, watermarks). It prints one line per thing
deleted or kept, and a summary. A stream that is not the deployment's is kept, saying why: one
made outside groupstate (input.stream, or one that captured the subjects first), one created
for another deployment, one another deployment reads or writes (a shadow's primary's input).
A runtime that is not running keeps its copy of the state on its data directory (the summary
names it). Modules and initial-state files are shared by content and stay. A name undeployed
before can be purged too. It asks to type the name to confirm; --yes confirms in scripts
(without a terminal and without --yes it refuses).`,
		Example: `  groupstate undeploy logincount
  groupstate undeploy carts --drain
  groupstate undeploy logincount --purge
  groupstate undeploy logincount --purge --yes --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if yes && !purge {
				return fmt.Errorf("--yes confirms --purge, which is not given")
			}
			if purge && !yes {
				if err := confirmPurge(cmd, name); err != nil {
					return err
				}
			}
			c, done, err := cf.client(cmd, "undeploy")
			if err != nil {
				return err
			}
			defer done()
			out := cmd.OutOrStdout()
			var drained *client.DrainReport
			if drain {
				ctx, cancel := context.WithTimeout(cmd.Context(), drainTimeout)
				defer cancel()
				fmt.Fprintf(cmd.ErrOrStderr(), "draining %s (firing every timeout)...\n", name)
				rep, err := c.Drain(ctx, name)
				if err != nil {
					return fmt.Errorf("%w; nothing was undeployed (undeploy again, with or without --drain)", err)
				}
				drained = &rep
				if !asJSON {
					fmt.Fprintf(out, "drained %s: %d partition(s), %d timeout call(s), %d row(s) emitted\n", name, rep.Partitions, rep.TimeoutCalls, rep.Emitted)
				}
			}
			result := struct {
				Name    string              `json:"name"`
				Drained *client.DrainReport `json:"drained,omitempty"`
				Purge   *client.PurgeReport `json:"purge,omitempty"`
			}{Name: name, Drained: drained}
			if !purge {
				if err := c.Undeploy(cmd.Context(), name); err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(out).Encode(result)
				}
				fmt.Fprintf(out, "undeployed %s\n", name)
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			rep, err := c.Purge(ctx, name)
			switch {
			case rep != nil && asJSON: // also what a purge that stopped did
				result.Purge = rep
				if jerr := json.NewEncoder(out).Encode(result); jerr != nil {
					return jerr
				}
			case rep != nil:
				printPurge(out, rep)
			}
			return err
		},
	}
	cmd.ValidArgsFunction = cf.completeNames(1)
	cf.register(cmd)
	cmd.Flags().BoolVar(&drain, "drain", false, "fire every timeout and publish the final records before undeploying")
	cmd.Flags().DurationVar(&drainTimeout, "drain-timeout", 5*time.Minute, "how long --drain waits for every partition to drain")
	cmd.Flags().BoolVar(&purge, "purge", false, "also delete the deployment's state, streams, consumers and KV entries, for good")
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm --purge without asking")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long --purge waits for the runtimes to stop the deployment")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON (with --purge, what it deleted and kept)")
	return cmd
}

// confirmPurge asks the user at a terminal to type name to confirm undeploy --purge; without
// a terminal it refuses, pointing at --yes.
func confirmPurge(cmd *cobra.Command, name string) error {
	in := cmd.InOrStdin()
	if !isTerminalReader(in) {
		return fmt.Errorf("undeploy --purge deletes %s's state and streams for good: confirm at a terminal, or add --yes", name)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "this deletes %s for good: its state, its streams with their messages, its consumers and records.\ntype the name to confirm: ", name)
	line, _ := bufio.NewReader(in).ReadString('\n')
	if strings.TrimSpace(line) != name {
		return fmt.Errorf("not confirmed (%q is not %q); nothing was deleted", strings.TrimSpace(line), name)
	}
	return nil
}

// isTerminalReader tells whether r is a character device (a terminal).
func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// printPurge prints what a purge deleted and kept, one line each, and a summary.
func printPurge(w io.Writer, rep *client.PurgeReport) {
	if rep.Undeployed {
		fmt.Fprintf(w, "undeployed %s\n", rep.Name)
	}
	for _, it := range rep.Deleted {
		fmt.Fprintf(w, "deleted %s %s\n", it.Kind, it.Name)
	}
	for _, it := range rep.Kept {
		fmt.Fprintf(w, "kept %s %s: %s\n", it.Kind, it.Name, it.Why)
	}
	count := map[string]int{}
	for _, it := range rep.Deleted {
		count[it.Kind]++
	}
	fmt.Fprintf(w, "purged %s: %d stream(s), %d consumer(s), %d KV key(s), %d state keyspace(s), %d snapshot set(s) deleted; %d kept\n",
		rep.Name, count[client.PurgeStream], count[client.PurgeConsumer], count[client.PurgeKV], count[client.PurgeState], count[client.PurgeSnapshots], len(rep.Kept))
}

// newPromoteCommand returns `groupstate promote`, which makes a shadow deployment the primary.
func newPromoteCommand() *cobra.Command {
	var cf connFlags
	var timeout time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "promote SHADOW [--json]",
		Short: "Make a shadow deployment the primary (its state kept; the old primary undeployed)",
		Long: `Undeploys the shadow's primary and waits until its runtime stopped it; the shadow then runs
the last batches the primary recorded and goes on reading the input itself, from the primary's
position on, with its state, publishing on its spec's own subjects (the primary's, unless the
spec named others). Rows of the primary's batch in flight at the undeploy, which it never
committed, are run by the promoted deployment. The promoted deployment keeps its name.`,
		Example: `  groupstate promote logincount-v2`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := cf.client(cmd, "promote")
			if err != nil {
				return err
			}
			defer done()
			d, err := c.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if d.ShadowOf == "" {
				return fmt.Errorf("%s is not a shadow", args[0])
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			fmt.Fprintf(cmd.ErrOrStderr(), "undeploying %s, then waiting for %s to run its last batches...\n", d.ShadowOf, d.Name)
			if err := c.Promote(ctx, args[0]); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(struct {
					Name          string `json:"name"`
					Undeployed    string `json:"undeployed"`
					OutputSubject string `json:"output_subject"`
				}{d.Name, d.ShadowOf, d.Spec.Output.Subject})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "promoted %s: %s is undeployed, and %s reads the input and publishes on %s\n", d.Name, d.ShadowOf, d.Name, d.Spec.Output.Subject)
			return nil
		},
	}
	cmd.ValidArgsFunction = cf.completeNames(1)
	cf.register(cmd)
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the promotion (it goes on after)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
