package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
)

// newTailCommand returns `groupstate tail`, which prints the messages on a subject.
func newTailCommand() *cobra.Command {
	var cf connFlags
	var headers bool
	var count int
	cmd := &cobra.Command{
		Use:   "tail SUBJECT",
		Short: "Print what arrives on a subject, one message a line",
		Example: `  groupstate tail logincount.out
  groupstate tail 'logincount.dlq' --headers`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			nc, err := cf.connect(cmd, "tail")
			if err != nil {
				return err
			}
			defer nc.Close()
			if err := client.CheckPermission(cmd.Context(), nc, "read "+args[0], args[0], false); err != nil {
				return err
			}
			msgs := make(chan *nats.Msg, 1024)
			sub, err := nc.ChanSubscribe(args[0], msgs)
			if err != nil {
				return err
			}
			defer sub.Unsubscribe()
			out := cmd.OutOrStdout()
			for seen := 0; count <= 0 || seen < count; seen++ {
				select {
				case <-cmd.Context().Done():
					return nil
				case m := <-msgs:
					if headers {
						fmt.Fprintf(out, "%s %s %s\n", m.Subject, formatHeaders(m.Header), m.Data)
					} else {
						fmt.Fprintln(out, string(m.Data))
					}
				}
			}
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&headers, "headers", false, "print the subject and headers before each message")
	cmd.Flags().IntVar(&count, "count", 0, "exit after this many messages (0: never)")
	return cmd
}

// formatHeaders formats h as [Key=v1,v2 ...], keys sorted.
func formatHeaders(h nats.Header) string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+strings.Join(h[k], ","))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
