package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/runtime/auth"
)

// newAuthCommand returns `groupstate auth`, the access-control helpers.
func newAuthCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Access control: the NATS permissions of each role",
	}
	cmd.AddCommand(newAuthPermissionsCommand())
	return cmd
}

// newAuthPermissionsCommand returns `groupstate auth permissions`.
func newAuthPermissionsCommand() *cobra.Command {
	var role string
	var subjects []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "permissions --role admin|reader|producer|consumer|runtime [--subjects S]...",
		Short: "Print the NATS permissions a user of a role needs on an external server",
		Long: `Print the NATS permissions (publish and subscribe allow lists) of a role, as a
permissions block of a NATS server configuration (or JSON with --json). An operator gives
each user of an external NATS server (serve --server) the block of its role, so that the
roles hold there as they do on the embedded server with serve --auth. A producer's and a
consumer's subjects are given with --subjects (repeat it, or separate with commas).`,
		Example: `  groupstate auth permissions --role reader
  groupstate auth permissions --role producer --subjects 'logins.>'
  groupstate auth permissions --role runtime --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if role == "" {
				return fmt.Errorf("--role is required: one of admin, reader, producer, consumer, runtime")
			}
			p, err := auth.For(auth.Role(role), subjects)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false) // subjects hold '>'
				return enc.Encode(p)
			}
			return printPermissions(cmd.OutOrStdout(), auth.Role(role), subjects, p)
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "admin, reader, producer, consumer or runtime")
	cmd.Flags().StringSliceVar(&subjects, "subjects", nil, "a producer's or consumer's subjects")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printPermissions writes p as the permissions block of a NATS server configuration.
func printPermissions(w io.Writer, role auth.Role, subjects []string, p auth.Permissions) error {
	list := func(ss []string) string {
		q := make([]string, len(ss))
		for i, s := range ss {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	what := string(role)
	if len(subjects) > 0 {
		what += " of " + strings.Join(subjects, ", ")
	}
	_, err := fmt.Fprintf(w, "# groupstate role %s: give a user of this role these permissions\npermissions: {\n  publish: { allow: %s }\n  subscribe: { allow: %s }\n}\n",
		what, list(p.Publish), list(p.Subscribe))
	return err
}
