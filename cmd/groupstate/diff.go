package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/replay"
)

// newDiffCommand returns `groupstate diff`.
func newDiffCommand() *cobra.Command {
	var cf connFlags
	var keys []string
	var since time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "diff NAME SHADOW",
		Short: "Compare a shadow deployment's outputs with its primary's, batch by batch",
		Long: `Compares the outputs SHADOW (a shadow of NAME: deploy --shadow) published with the ones NAME
published, batch by batch and key by key. Nothing runs: the shadow ran each of NAME's batches
again, and records which one as its position, so each of its batches is compared with the batch
of NAME it ran, whether NAME committed that batch in one chunk or several. Only the batches both
ran are compared: NAME's batches the shadow has not reached yet are left out. --since bounds the
shadow's batches compared to its last span of processing time; --key limits the comparison to
some keys (taken as JSON when they are a JSON number or string, else as strings). "old" rows are
NAME's, "new" rows SHADOW's. Exit status: 0 when the outputs are the same, 1 when they differ,
2 on errors (SHADOW not a shadow of NAME among them).`,
		Example: `  groupstate diff logincount logincount-v2
  groupstate diff logincount logincount-v2 --key alice --since 1h
  groupstate diff logincount logincount-v2 --json > diff.json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := runDiff(cmd, &cf, args[0], args[1], keys, since, asJSON)
			var ex *exitError
			if err != nil && !errors.As(err, &ex) {
				return &exitError{code: 2, msg: "groupstate: " + userMessage(err)}
			}
			return err
		},
	}
	cmd.ValidArgsFunction = cf.completeNames(2)
	cf.register(cmd)
	fl := cmd.Flags()
	fl.StringArrayVar(&keys, "key", nil, "compare only this key (repeatable)")
	fl.DurationVar(&since, "since", 0, "compare the shadow's batches of this last span of processing time (24h, 30m)")
	fl.BoolVar(&asJSON, "json", false, "print the whole report, every difference, as JSON")
	return cmd
}

func runDiff(cmd *cobra.Command, cf *connFlags, name, shadow string, keys []string, since time.Duration, asJSON bool) error {
	c, done, err := cf.client(cmd, "diff")
	if err != nil {
		return err
	}
	defer done()
	pd, err := c.Get(cmd.Context(), name)
	if err != nil {
		return err
	}
	sd, err := c.Get(cmd.Context(), shadow)
	if err != nil {
		return err
	}
	if err := checkShadowOf(sd, name); err != nil {
		return err
	}
	opts := replay.DiffOptions{JS: c.JetStream(), Primary: pd.RunSpec(), Shadow: sd.RunSpec(), Since: since, Logger: quietLogger(cmd.ErrOrStderr())}
	opts.Keys = keyArgs(keys)
	rep, err := replay.Diff(cmd.Context(), opts)
	if err != nil {
		return err
	}
	return finishReport(cmd.OutOrStdout(), asJSON, rep, func(w io.Writer) { printDiff(w, name, shadow, rep) })
}

// checkShadowOf refuses a deployment sd that the registry does not record as a shadow of
// primary (exit 2, with a message that says so).
func checkShadowOf(sd *client.Deployment, primary string) error {
	switch sd.ShadowOf {
	case primary:
		return nil
	case "":
		return &exitError{code: 2, msg: fmt.Sprintf("groupstate: %s is not a shadow of %s (promoted already?)", sd.Name, primary)}
	}
	return &exitError{code: 2, msg: fmt.Sprintf("groupstate: %s is not a shadow of %s but of %s", sd.Name, primary, sd.ShadowOf)}
}

// printDiff prints the summary of a diff of shadow with name and the first difference of
// each key.
func printDiff(w io.Writer, name, shadow string, rep *replay.Report) {
	fmt.Fprintf(w, "compared %d batches of %s with %s (%d input rows), %d keys; old: %s's outputs, new: %s's\n",
		rep.Compared, shadow, name, rep.Rows, rep.Keys, name, shadow)
	printReport(w, rep)
}
