package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/runtime/client"
)

// newStateCommand returns `groupstate state`, a key's state or the deployment's keys.
func newStateCommand() *cobra.Command {
	var cf connFlags
	var asJSON bool
	var limit int
	var after string
	var dump bool
	cmd := &cobra.Command{
		Use:   "state NAME [KEY]",
		Short: "Print a key's state value (exit 1 when it has none), or list the deployment's keys",
		Long: `With KEY, prints the key's state value to standard output and exits 0, or exits 1 when the
key has no state. KEY is taken as JSON when it is a JSON number or string (42, '"42"'), else
as a string (alice). Without KEY, lists keys in key order, a page at a time (--limit, --after).
Exit status: 0 with a value, 1 when the key has no state, 2 on any other error.`,
		Example: `  groupstate state logincount alice
  groupstate state logincount alice --json
  groupstate state logincount --limit 100
  groupstate state logincount --dump > state.jsonl`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if dump {
				err = stateDump(cmd, &cf, args)
			} else {
				err = stateRun(cmd, &cf, args, asJSON, limit, after)
			}
			var ex *exitError
			if err != nil && !errors.As(err, &ex) {
				// Exit 1 means "no state"; anything else that went wrong is 2.
				return &exitError{code: 2, msg: "groupstate: " + userMessage(err)}
			}
			return err
		},
	}
	cmd.ValidArgsFunction = cf.completeNames(1)
	cf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the value with its timeout as JSON")
	cmd.Flags().IntVar(&limit, "limit", 100, "keys per page when listing")
	cmd.Flags().StringVar(&after, "after", "", "list keys after this one")
	cmd.Flags().BoolVar(&dump, "dump", false, "export all state as JSON Lines: one {key, value, timeout_ms} a line")
	return cmd
}

// stateDump writes every key's state as JSON Lines, fetching pages of keys in key order.
func stateDump(cmd *cobra.Command, cf *connFlags, args []string) error {
	if len(args) != 1 {
		return errors.New("--dump takes the deployment name only")
	}
	c, done, err := cf.client(cmd, "state")
	if err != nil {
		return err
	}
	defer done()
	enc := json.NewEncoder(cmd.OutOrStdout())
	var after []byte
	n := 0
	for {
		keys, next, err := c.Keys(cmd.Context(), args[0], after, 1000)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := enc.Encode(k); err != nil {
				return err
			}
			n++
		}
		if next == nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "dumped %d keys\n", n)
			return nil
		}
		after = next
	}
}

// stateRun prints the state of the key args[1] of the deployment args[0] (exitError 1 when it has
// none), or, without a key, a page of its keys.
func stateRun(cmd *cobra.Command, cf *connFlags, args []string, asJSON bool, limit int, after string) error {
	c, done, err := cf.client(cmd, "state")
	if err != nil {
		return err
	}
	defer done()
	out := cmd.OutOrStdout()
	if len(args) == 2 {
		ks, found, err := c.State(cmd.Context(), args[0], client.KeyFromArg(args[1]))
		if err != nil {
			return err
		}
		if asJSON {
			if !found {
				ks = &client.KeyState{Key: client.KeyFromArg(args[1])}
			}
			b, _ := json.Marshal(ks)
			fmt.Fprintln(out, string(b))
		}
		if !found || !ks.HasValue {
			msg := "" // --json said it: {"has_value": false}
			if !asJSON {
				msg = fmt.Sprintf("%s has no state for key %s", args[0], client.KeyFromArg(args[1]))
			}
			return &exitError{code: 1, msg: msg}
		}
		if !asJSON {
			fmt.Fprintln(out, string(ks.Value))
		}
		return nil
	}
	var start []byte
	if after != "" {
		start = client.KeyFromArg(after)
	}
	keys, next, err := c.Keys(cmd.Context(), args[0], start, limit)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if asJSON {
			b, _ := json.Marshal(k)
			fmt.Fprintln(out, string(b))
		} else {
			fmt.Fprintln(out, string(k.Key))
		}
	}
	if next != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "more keys: --after '%s'\n", next)
	}
	return nil
}
