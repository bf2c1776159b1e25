package main

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/service"
)

// connFlags are the NATS connection flags every client command takes.
type connFlags struct {
	opts service.ConnOptions
}

// register adds the connection flags to cmd.
func (f *connFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.opts.URL, "server", service.DefaultURL(), "NATS server URL (default $NATS_URL, else nats://127.0.0.1:4222)")
	fl.StringVar(&f.opts.CredsFile, "creds", "", "NATS credentials file")
	fl.StringVar(&f.opts.NKeyFile, "nkey", "", "NATS nkey seed file")
	fl.StringVar(&f.opts.User, "user", "", "NATS user")
	fl.StringVar(&f.opts.Password, "password", "", "NATS password")
	fl.StringVar(&f.opts.TLSCA, "tls-ca", "", "CA certificate to verify the NATS server")
	fl.StringVar(&f.opts.TLSCert, "tls-cert", "", "client certificate for NATS")
	fl.StringVar(&f.opts.TLSKey, "tls-key", "", "client certificate key for NATS")
}

// connect connects to NATS for the command cmd (named name in the connection's name), logging
// connection trouble to the command's standard error.
func (f *connFlags) connect(cmd *cobra.Command, name string) (*nats.Conn, error) {
	o := f.opts
	o.Name = "groupstate " + name
	o.Logger = quietLogger(cmd.ErrOrStderr())
	return service.Connect(o)
}

// client connects and opens a client.Client for cmd; close releases both.
func (f *connFlags) client(cmd *cobra.Command, name string) (c *client.Client, closeFn func(), err error) {
	nc, err := f.connect(cmd, name)
	if err != nil {
		return nil, nil, err
	}
	c, err = client.New(cmd.Context(), nc, client.WithCacheDir(defaultCacheDir()))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return c, func() { c.Close(context.Background()); nc.Close() }, nil
}

// completeNames completes the first n arguments of a command with the names of the
// deployments, asked of NATS with the command's connection flags (quietly: a shell completing
// a word must not print errors). Past them, nothing is offered.
func (f *connFlags) completeNames(n int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= n {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		o := f.opts
		o.Name, o.Logger = "groupstate completion", slog.New(slog.DiscardHandler)
		nc, err := service.Connect(o)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer nc.Close()
		ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
		defer cancel()
		c, err := client.New(ctx, nc)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer c.Close(context.Background())
		ds, err := c.List(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []cobra.Completion
		for _, d := range ds {
			if d.Invalid == "" && !slices.Contains(args, d.Name) {
				names = append(names, d.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
