package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
)

// newTailCommand returns `groupstate tail`, which prints the messages on a subject.
func newTailCommand() *cobra.Command {
	var cf connFlags
	var headers, asJSON bool
	var count int
	cmd := &cobra.Command{
		Use:   "tail SUBJECT [--headers] [--count N] [--json]",
		Short: "Print what arrives on a subject, one message a line",
		Long: `Prints each message that arrives on SUBJECT (a NATS subscription: what is published from now
on), one a line: its data, with --headers its subject and headers first.

--json prints one JSON object a line per message: subject, time (when tail received it),
sequence (its stream sequence, when it came through JetStream), headers, and data (as JSON
when it parses, else as a string).`,
		Example: `  groupstate tail logincount.out
  groupstate tail 'logincount.dlq' --headers
  groupstate tail logincount.out --json --count 10`,
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
			// Once the server has the subscription, what is published is shown: say so, so
			// that a script (or a user) knows when to publish.
			if err := nc.FlushTimeout(5 * time.Second); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "following %s: what is published from now on (Ctrl-C to stop)\n", args[0])
			out := cmd.OutOrStdout()
			for seen := 0; count <= 0 || seen < count; seen++ {
				select {
				case <-cmd.Context().Done():
					return nil
				case m := <-msgs:
					if asJSON {
						if err := json.NewEncoder(out).Encode(tailMessage(m, time.Now())); err != nil {
							return err
						}
						continue
					}
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
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object a line per message (subject, time, sequence, headers, data)")
	return cmd
}

// tailJSON is one message as tail --json prints it.
type tailJSON struct {
	Subject string    `json:"subject"`
	Time    time.Time `json:"time"`
	// Sequence is the message's stream sequence, when it came through JetStream.
	Sequence uint64              `json:"sequence,omitempty"`
	Headers  map[string][]string `json:"headers,omitempty"`
	// Data is the message's data: as JSON when it parses, else as a JSON string.
	Data json.RawMessage `json:"data"`
}

// tailMessage is m, received at now, as tail --json prints it.
func tailMessage(m *nats.Msg, now time.Time) tailJSON {
	t := tailJSON{Subject: m.Subject, Time: now.UTC(), Headers: m.Header}
	if md, err := m.Metadata(); err == nil {
		t.Sequence, t.Time = md.Sequence.Stream, md.Timestamp.UTC()
	}
	if json.Valid(m.Data) && len(bytes.TrimSpace(m.Data)) > 0 {
		t.Data = json.RawMessage(bytes.TrimSpace(m.Data))
	} else {
		t.Data, _ = json.Marshal(string(m.Data))
	}
	return t
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
