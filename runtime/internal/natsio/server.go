package natsio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server start errors.
var (
	// ErrNoDataDir is returned by [StartServer] when ServerOptions.DataDir is empty.
	ErrNoDataDir = errors.New("natsio: server data directory is required")
	// ErrServerNotReady is returned by [StartServer] when the server does not accept
	// connections within [ServerReadyTimeout].
	ErrServerNotReady = errors.New("natsio: embedded NATS server not ready")
)

// ServerReadyTimeout bounds how long [StartServer] waits for the server to accept
// connections.
const ServerReadyTimeout = 10 * time.Second

// ServerOptions configures the embedded NATS server started by [StartServer].
type ServerOptions struct {
	// DataDir is groupstate's data directory; JetStream storage goes under
	// DataDir/jetstream. Required.
	DataDir string
	// Host is the client listen address. Default "127.0.0.1" (loopback only).
	Host string
	// Port is the client port. Default 4222; -1 picks a random free port (tests).
	Port int
	// Logger receives the server's logs (notices at Info, warnings at Warn, errors
	// and fatal errors at Error, debug and trace at Debug; debug logging is enabled
	// on the server only when Logger is enabled at slog.LevelDebug, tracing never).
	// Default slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills the zero fields of o with their defaults and returns o.
func (o ServerOptions) EnsureDefaults() ServerOptions {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = 4222
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Validate reports whether o is usable.
func (o ServerOptions) Validate() error {
	if o.DataDir == "" {
		return ErrNoDataDir
	}
	if o.Port < -1 || o.Port > 65535 {
		return fmt.Errorf("natsio: invalid server port %d", o.Port)
	}
	return nil
}

// StartServer starts an embedded NATS server with JetStream enabled (file storage
// under DataDir/jetstream) and waits, at most [ServerReadyTimeout], until it
// accepts connections. The caller stops it with Shutdown and then
// WaitForShutdown. A server that logs a fatal error while starting (port in use,
// unusable storage) is shut down and its message returned.
func StartServer(opts ServerOptions) (*server.Server, error) {
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	sopts := &server.Options{
		ServerName: "groupstate",
		Host:       opts.Host,
		Port:       opts.Port,
		JetStream:  true,
		StoreDir:   filepath.Join(opts.DataDir, "jetstream"),
		NoSigs:     true,
	}
	s, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("natsio: configuring embedded NATS server: %w", err)
	}
	lg := &serverLogger{l: opts.Logger.With("component", "nats-server")}
	debug := opts.Logger.Enabled(context.Background(), slog.LevelDebug)
	s.SetLoggerV2(lg, debug, false, false)

	go s.Start()

	deadline := time.Now().Add(ServerReadyTimeout)
	for {
		if msg := lg.fatal(); msg != "" {
			s.Shutdown()
			s.WaitForShutdown()
			return nil, fmt.Errorf("natsio: embedded NATS server on %s:%d failed to start: %s", opts.Host, opts.Port, msg)
		}
		if s.ReadyForConnections(50*time.Millisecond) && s.JetStreamEnabled() {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Shutdown()
			s.WaitForShutdown()
			return nil, fmt.Errorf("%w: %s:%d did not accept connections with JetStream within %s", ErrServerNotReady, opts.Host, opts.Port, ServerReadyTimeout)
		}
	}
}

// serverLogger adapts slog to server.Logger. It remembers the first fatal
// message so that StartServer can report it.
type serverLogger struct {
	l        *slog.Logger
	mu       sync.Mutex
	fatalMsg string
}

func (g *serverLogger) fatal() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fatalMsg
}

func logf(l *slog.Logger, level slog.Level, format string, v []any) {
	if !l.Enabled(context.Background(), level) {
		return
	}
	l.Log(context.Background(), level, strings.TrimSpace(fmt.Sprintf(format, v...)))
}

func (g *serverLogger) Noticef(format string, v ...any) { logf(g.l, slog.LevelInfo, format, v) }
func (g *serverLogger) Warnf(format string, v ...any)   { logf(g.l, slog.LevelWarn, format, v) }
func (g *serverLogger) Errorf(format string, v ...any)  { logf(g.l, slog.LevelError, format, v) }
func (g *serverLogger) Debugf(format string, v ...any)  { logf(g.l, slog.LevelDebug, format, v) }
func (g *serverLogger) Tracef(format string, v ...any)  { logf(g.l, slog.LevelDebug, format, v) }

func (g *serverLogger) Fatalf(format string, v ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, v...))
	g.mu.Lock()
	if g.fatalMsg == "" {
		g.fatalMsg = msg
	}
	g.mu.Unlock()
	g.l.Error(msg, "fatal", true)
}
