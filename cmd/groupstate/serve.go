package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
)

// newServeCommand returns `groupstate serve`, which runs the runtime until its context is
// cancelled (in the binary, by SIGINT or SIGTERM).
func newServeCommand() *cobra.Command {
	var cf connFlags
	var ceil ceilingFlags
	var dataDir, listen, logLevel, logFormat, metricsAddr, stateCache, authFile string
	var insecure bool
	var metricsAuth string
	var replicas int
	var id string
	var memberTTL time.Duration
	cmd := &cobra.Command{
		Use:   "serve --data DIR [--listen HOST:PORT] [--auth FILE] [--server URL] [--metrics HOST:PORT] [--state-cache SIZE]",
		Short: "Run the runtime (with an embedded NATS server unless --server is given)",
		Long: `Runs every deployment registered in NATS. Without --server it embeds a NATS server with
JetStream (storage under DIR/nats) listening on --listen, so one command runs everything on
one machine. With --server it uses that NATS instead (for example a JetStream cluster).
SIGTERM or Ctrl-C finishes the batches in flight, commits them, flushes outputs and exits 0;
a second signal while that waits exits at once with code 130 (the batches in flight are
redelivered when serve runs again).

Without --auth the embedded server has no authentication: whoever reaches it may deploy
code, read any state and delete anything. It listens on loopback by default, and serve
refuses a --listen address other machines can reach unless --auth FILE (a users file with
roles, see docs/security.md) or --insecure is given.`,
		Example: `  groupstate serve --data ./gsdata
  groupstate serve --data /var/lib/groupstate --server nats://nats.internal:4222 --creds app.creds`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return fmt.Errorf("--data is required")
			}
			cacheSize, err := parseStateCache(stateCache)
			if err != nil {
				return err
			}
			ceilings, err := ceil.ceilings()
			if err != nil {
				return err
			}
			logger, err := newLogger(cmd.ErrOrStderr(), logLevel, logFormat)
			if err != nil {
				return err
			}
			if err := privateDataDir(dataDir, logger); err != nil {
				return err
			}
			release, err := lockDataDir(dataDir)
			if err != nil {
				return err
			}
			defer release()
			ctx := cmd.Context()
			if cmd.Flags().Changed("server") && authFile != "" {
				return fmt.Errorf("--auth configures the embedded server; on an external server (--server), give each user the permissions of its role (groupstate auth permissions --role ROLE)")
			}
			var natsFault func() error // the embedded server's full disk (see service.EmbeddedFault)
			if !cmd.Flags().Changed("server") {
				host, port, err := splitHostPort(listen)
				if err != nil {
					return err
				}
				if err := portFree(host, port); err != nil {
					return err
				}
				eo := service.EmbeddedOptions{DataDir: filepath.Join(dataDir, "nats"), Host: host, Port: port, Logger: logger}
				if err := embeddedAuth(&eo, &cf, authFile, insecure); err != nil {
					return err
				}
				srv, err := service.StartEmbedded(eo)
				if err != nil {
					return err
				}
				defer func() {
					srv.Shutdown()
					srv.WaitForShutdown()
				}()
				natsFault = func() error { return service.EmbeddedFault(srv) }
				cf.opts.URL = srv.ClientURL()
				logger.Info("embedded NATS listening", "url", cf.opts.URL)
			}
			o := cf.opts
			o.Name, o.Logger = "groupstate serve", logger
			nc, err := service.Connect(o)
			if err != nil {
				return err
			}
			defer nc.Drain()
			if replicas < 0 || replicas > 5 {
				return fmt.Errorf("--replicas %d: want 1 to 5 (JetStream's limit), or 0 for the default", replicas)
			}
			cfg := service.Options{DataDir: filepath.Join(dataDir, "runtime"), Conn: nc, Logger: logger, Replicas: replicas, ID: id, MemberTTL: memberTTL,
				StateOptions: &state.Options{StateCacheSize: cacheSize}, Ceilings: ceilings, NATSFault: natsFault}
			reg := prometheus.NewRegistry()
			if metricsAddr != "" {
				reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
				cfg.Metrics = service.NewMetrics(reg)
			}
			svc, err := service.New(ctx, cfg)
			if err != nil {
				return err
			}
			if metricsAddr != "" {
				guard, err := metricsGuard(metricsAuth)
				if err != nil {
					return err
				}
				stop, err := serveMetrics(metricsAddr, reg, guard, func() error {
					switch {
					case !svc.Ready():
						return errors.New("not ready")
					case !nc.IsConnected():
						return errors.New("not ready: NATS not connected")
					}
					if err := svc.Fault(); err != nil {
						return fmt.Errorf("not ready: %w", err)
					}
					return nil
				}, logger)
				if err != nil {
					return err
				}
				defer stop()
			}
			return svc.Run(ctx)
		},
	}
	cf.register(cmd)
	ceil.register(cmd)
	cmd.Flags().StringVar(&dataDir, "data", "", "directory for state, compiled modules and the embedded server's storage")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:4222", "address of the embedded NATS server")
	cmd.Flags().StringVar(&authFile, "auth", "", "users file (YAML) of the embedded server: only its users may connect, each with its role's permissions")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "allow a --listen address other machines can reach without --auth (anyone who reaches it may do anything)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "text or json")
	cmd.Flags().StringVar(&metricsAddr, "metrics", "", "serve Prometheus metrics, /healthz and /readyz on HOST:PORT")
	cmd.Flags().StringVar(&metricsAuth, "metrics-auth", "", "file whose first line /metrics requires: 'bearer TOKEN' or 'basic USER:PASSWORD' (default: /metrics is open)")
	cmd.Flags().StringVar(&id, "id", "", "name of this runtime (default: an id made once and kept in the data directory)")
	cmd.Flags().DurationVar(&memberTTL, "member-ttl", 5*time.Second, "how long a runtime that stops renewing its membership stays a member (the same on every runtime)")
	cmd.Flags().IntVar(&replicas, "replicas", 0, "replicas of the streams and buckets groupstate creates (default 3 on a clustered NATS, 1 otherwise)")
	cmd.Flags().StringVar(&stateCache, "state-cache", "64MiB", "memory for the hot-state cache shared by all deployments (e.g. 256MiB; 0 turns it off)")
	return cmd
}

// parseStateCache reads --state-cache: a size, or 0 for no cache (state.Options wants a
// negative size for that).
func parseStateCache(s string) (int64, error) {
	n, err := spec.ParseByteSize(s)
	if err != nil {
		return 0, fmt.Errorf("--state-cache: %w", err)
	}
	if n == 0 {
		return -1, nil
	}
	if n > 1<<40 {
		return 0, fmt.Errorf("--state-cache: %s is more than 1TiB", s)
	}
	return int64(n), nil
}

// serveMetrics serves /metrics, /healthz (the process is up) and /readyz (the runtime runs,
// NATS is connected, and neither the state store nor the NATS server is failing, as on a full
// disk: ready returns why not) on addr until stop is called.
func serveMetrics(addr string, reg *prometheus.Registry, guard func(http.Handler) http.Handler, ready func() error, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", guard(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			logger.Error("metrics server stopped", "err", err)
		}
	}()
	logger.Info("metrics listening", "addr", ln.Addr().String())
	return func() { srv.Close() }, nil
}

// privateDataDir creates the data directory readable by its user only, or makes an existing
// one so (saying so), and has serve create every file and directory under it the same way.
func privateDataDir(dir string, logger *slog.Logger) error {
	restrictFileModes()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--data %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("--data %s: %w", dir, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("--data %s is readable by other accounts (%04o) and cannot be made private: %w", dir, perm, err)
		}
		logger.Info("data directory was readable by other accounts; made it private", "dir", dir, "was", fmt.Sprintf("%04o", perm), "now", "0700")
	}
	return nil
}

// newLogger returns the logger of --log-level and --log-format, writing to w.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
