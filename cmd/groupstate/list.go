package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/runtime/client"
)

// newListCommand returns `groupstate list`, the deployments with their health.
func newListCommand() *cobra.Command {
	var cf connFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List deployments with their health, and the live runtimes",
		Example: `  groupstate list`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, done, err := cf.client(cmd, "list")
			if err != nil {
				return err
			}
			defer done()
			ds, err := c.List(cmd.Context())
			if err != nil {
				return err
			}
			type row struct {
				*client.Deployment
				Status *client.Status `json:"status"`
			}
			rows := make([]row, len(ds))
			for i, d := range ds {
				if d.Invalid != "" {
					rows[i] = row{d, &client.Status{Name: d.Name, State: "invalid", Error: d.Invalid}}
					continue
				}
				st, err := c.Status(cmd.Context(), d.Name)
				if err != nil {
					st = &client.Status{Name: d.Name, State: "unknown", Error: err.Error()}
				}
				rows[i] = row{d, st}
			}
			runtimes, err := c.Runtimes(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Deployments []row            `json:"deployments"`
					Runtimes    []client.Runtime `json:"runtimes"`
				}{rows, runtimes})
			}
			if len(rows) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no deployments")
				return printRuntimes(cmd.OutOrStdout(), runtimes)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			now := time.Now()
			fmt.Fprintln(w, "NAME\tSTATE\tROWS IN\tKEYS\tLAG\tMODULE\tDEPLOYED\tERROR")
			for _, r := range rows {
				name := r.Name
				if r.ShadowOf != "" {
					name += " (shadow of " + r.ShadowOf + ")"
				}
				deployed := "-"
				if !r.DeployedAt.IsZero() {
					deployed = r.DeployedAt.Local().Format(time.DateTime)
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%.12s\t%s\t%s\n", name, r.Status.ShownState(now), r.Status.RowsIn, r.Status.StateKeys,
					r.Status.InputLag, r.ModuleDigest, deployed, r.Status.Error)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return printRuntimes(cmd.OutOrStdout(), runtimes)
		},
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printRuntimes prints the live runtimes after the deployments.
func printRuntimes(out io.Writer, runtimes []client.Runtime) error {
	if len(runtimes) == 0 {
		_, err := fmt.Fprintln(out, "\nno runtime is running")
		return err
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUNTIME\tPARTITIONS\tSTANDBYS\tSTARTED")
	for _, r := range runtimes {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", r.ID, r.Partitions, r.Standbys, r.StartedAt.Local().Format(time.DateTime))
	}
	return w.Flush()
}
