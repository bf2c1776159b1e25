package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/runtime"
)

func newServeCommand() *cobra.Command {
	var cf connFlags
	var dataDir, listen, logLevel, logFormat string
	cmd := &cobra.Command{
		Use:   "serve --data DIR [--listen HOST:PORT] [--server URL]",
		Short: "Run the runtime (with an embedded NATS server unless --server is given)",
		Long: `Runs every deployment registered in NATS. Without --server it embeds a NATS server with
JetStream (storage under DIR/nats) listening on --listen, so one command runs everything on
one machine. With --server it uses that NATS instead (for example a JetStream cluster).
SIGTERM or Ctrl-C finishes the batches in flight, commits them, flushes outputs and exits 0.`,
		Example: `  groupstate serve --data ./gsdata
  groupstate serve --data /var/lib/groupstate --server nats://nats.internal:4222 --creds app.creds`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return fmt.Errorf("--data is required")
			}
			logger, err := newLogger(logLevel, logFormat)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if !cmd.Flags().Changed("server") {
				host, port, err := splitHostPort(listen)
				if err != nil {
					return err
				}
				srv, err := runtime.StartEmbedded(runtime.EmbeddedOptions{DataDir: filepath.Join(dataDir, "nats"), Host: host, Port: port, Logger: logger})
				if err != nil {
					return err
				}
				defer func() {
					srv.Shutdown()
					srv.WaitForShutdown()
				}()
				cf.opts.URL = srv.ClientURL()
				logger.Info("embedded NATS listening", "url", cf.opts.URL)
			}
			o := cf.opts
			o.Name, o.Logger = "groupstate serve", logger
			nc, err := runtime.Connect(o)
			if err != nil {
				return err
			}
			defer nc.Drain()
			svc, err := runtime.NewService(ctx, runtime.ServiceConfig{DataDir: filepath.Join(dataDir, "runtime"), Conn: nc, Logger: logger})
			if err != nil {
				return err
			}
			return svc.Run(ctx)
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&dataDir, "data", "", "directory for state, compiled modules and the embedded server's storage")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:4222", "address of the embedded NATS server")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "text or json")
	return cmd
}

func newLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, o)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
