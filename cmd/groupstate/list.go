package main

import (
	"encoding/json"
	"fmt"
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
		Short:   "List deployments with their health",
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
				st, err := c.Status(cmd.Context(), d.Name)
				if err != nil {
					st = &client.Status{Name: d.Name, State: "unknown", Error: err.Error()}
				}
				rows[i] = row{d, st}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no deployments")
				return nil
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tSTATE\tROWS IN\tKEYS\tLAG\tMODULE\tDEPLOYED\tERROR")
			for _, r := range rows {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%.12s\t%s\t%s\n", r.Name, r.Status.State, r.Status.RowsIn, r.Status.StateKeys,
					r.Status.InputLag, r.ModuleDigest, r.DeployedAt.Local().Format(time.DateTime), r.Status.Error)
			}
			return w.Flush()
		},
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
