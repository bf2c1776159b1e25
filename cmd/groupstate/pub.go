package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

// newPubCommand returns `groupstate pub`, which publishes JSON lines to a subject.
func newPubCommand() *cobra.Command {
	var cf connFlags
	var file string
	var rate float64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pub SUBJECT [--file F.jsonl] [--json]",
		Short: "Publish JSON lines (from a file or standard input) to a subject, one message a line",
		Long: `Publishes each non-empty line as one message, through JetStream, so every message is
acknowledged by the stream that captures SUBJECT (deploy a handler whose input.subjects match
first). Progress goes to standard error.`,
		Example: `  echo '{"user_id":"ada"}' | groupstate pub logins.web
  groupstate pub logins.web --file logins.jsonl
  groupstate pub logins.web --file logins.jsonl --rate 1000`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in io.Reader = cmd.InOrStdin()
			if file != "" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			nc, err := cf.connect(cmd, "pub")
			if err != nil {
				return err
			}
			defer nc.Close()
			if err := client.CheckPermission(cmd.Context(), nc, "publish rows to "+args[0], args[0], true); err != nil {
				return err
			}
			sent, n, err := publishLines(cmd, nc, args[0], in, rate)
			if asJSON {
				res := struct {
					Subject   string `json:"subject"`
					Published int    `json:"published"`
					Acked     int    `json:"acked"`
					Error     string `json:"error,omitempty"`
				}{Subject: args[0], Published: sent, Acked: n}
				if err != nil {
					res.Error = userMessage(err)
				}
				if jerr := json.NewEncoder(cmd.OutOrStdout()).Encode(res); jerr != nil {
					return jerr
				}
			}
			noun := "messages"
			if n == 1 {
				noun = "message"
			}
			switch {
			case err == nil:
				fmt.Fprintf(cmd.ErrOrStderr(), "published %d %s to %s\n", n, noun, args[0])
			case n > 0:
				fmt.Fprintf(cmd.ErrOrStderr(), "%d %s to %s acknowledged before the error\n", n, noun, args[0])
			}
			return err
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&file, "file", "", "JSON Lines file to publish (default standard input)")
	cmd.Flags().Float64Var(&rate, "rate", 0, "messages per second (0: as fast as the server acknowledges)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the counts (published, acknowledged) as JSON on standard output")
	return cmd
}

// publishLines publishes every non-empty line of in to subject through JetStream, with a
// bounded window of unacknowledged messages, and reports progress once a second. It returns
// how many it published and how many the stream acknowledged.
func publishLines(cmd *cobra.Command, nc *nats.Conn, subject string, in io.Reader, rate float64) (sent, acked int, err error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return 0, 0, err
	}
	ctx := cmd.Context()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	start, last := time.Now(), time.Now()
	n := 0
	var futures []jetstream.PubAckFuture
	wait := func() error {
		for _, f := range futures {
			select {
			case <-f.Ok():
				acked++
			case err := <-f.Err():
				if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
					return fmt.Errorf("no JetStream stream captures %s: deploy a handler whose input.subjects match it first", subject)
				}
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		futures = futures[:0]
		return nil
	}
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if rate > 0 {
			// Pace by the schedule, not by sleeping a fixed time per message, so the rate
			// holds whatever publishing costs.
			if due := start.Add(time.Duration(float64(n) / rate * float64(time.Second))); time.Until(due) > 0 {
				select {
				case <-time.After(time.Until(due)):
				case <-ctx.Done():
					return n, acked, ctx.Err()
				}
			}
		}
		f, err := js.PublishAsync(subject, append([]byte(nil), line...))
		if err != nil {
			return n, acked, err
		}
		futures = append(futures, f)
		n++
		if len(futures) >= 1024 {
			if err := wait(); err != nil {
				return n, acked, err
			}
		}
		if time.Since(last) >= time.Second {
			last = time.Now()
			fmt.Fprintf(cmd.ErrOrStderr(), "\r%d messages, %.0f/s", n, float64(n)/time.Since(start).Seconds())
		}
	}
	if err := sc.Err(); err != nil {
		return n, acked, err
	}
	if err := wait(); err != nil {
		return n, acked, err
	}
	if time.Since(start) >= time.Second {
		fmt.Fprintln(cmd.ErrOrStderr())
	}
	return n, acked, nil
}
