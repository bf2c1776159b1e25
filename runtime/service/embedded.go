package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/groupstate/groupstate/runtime/auth"
)

// Errors of [StartEmbedded].
var (
	// ErrNoDataDir is returned by [StartEmbedded] when EmbeddedOptions.DataDir is empty.
	ErrNoDataDir = errors.New("service: the embedded NATS server needs a data directory")
	// ErrEmbeddedNotReady is returned by [StartEmbedded] when the server does not accept
	// connections within [EmbeddedReadyTimeout].
	ErrEmbeddedNotReady = errors.New("service: embedded NATS server not ready")
)

// EmbeddedReadyTimeout bounds how long [StartEmbedded] waits for the server to accept
// connections.
const EmbeddedReadyTimeout = 10 * time.Second

// EmbeddedOptions configures the embedded NATS server of `groupstate serve`, started by
// [StartEmbedded].
type EmbeddedOptions struct {
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
	// Users, when not empty, turn authentication on (serve --auth): only they and the
	// runtime's own user (auth.RuntimeUser, with RuntimePassword) may connect, each with its
	// role's permissions (auth.For); an anonymous connection is refused. Empty: no
	// authentication, anyone who reaches the port may do anything (the default on loopback).
	Users []auth.User
	// RuntimePassword is the password of the runtime's own user; required with Users. The
	// caller makes it (random, per process) and connects with it; it is never logged.
	RuntimePassword string
}

// withDefaults returns o with its zero fields set to their defaults.
func (o EmbeddedOptions) withDefaults() EmbeddedOptions {
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

// validate reports whether o is usable.
func (o EmbeddedOptions) validate() error {
	if o.DataDir == "" {
		return ErrNoDataDir
	}
	if o.Port < -1 || o.Port > 65535 {
		return fmt.Errorf("service: invalid server port %d", o.Port)
	}
	if len(o.Users) > 0 && len(o.RuntimePassword) < 16 {
		return errors.New("service: an embedded server with users needs the runtime's password (at least 16 characters)")
	}
	return nil
}

// authorize sets sopts' users from o (nothing when o has none).
func (o EmbeddedOptions) authorize(sopts *server.Options) error {
	if len(o.Users) == 0 {
		return nil
	}
	perms := func(role auth.Role, subjects []string) (*server.Permissions, error) {
		p, err := auth.For(role, subjects)
		if err != nil {
			return nil, err
		}
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: p.Publish},
			Subscribe: &server.SubjectPermission{Allow: p.Subscribe},
		}, nil
	}
	rp, err := perms(auth.Runtime, nil)
	if err != nil {
		return err
	}
	sopts.Users = []*server.User{{Username: auth.RuntimeUser, Password: o.RuntimePassword, Permissions: rp}}
	for _, u := range o.Users {
		p, err := perms(u.Role, u.Subjects)
		if err != nil {
			return fmt.Errorf("service: user %s: %w", u.Name, err)
		}
		if u.Nkey != "" {
			sopts.Nkeys = append(sopts.Nkeys, &server.NkeyUser{Nkey: u.Nkey, Permissions: p})
			continue
		}
		sopts.Users = append(sopts.Users, &server.User{Username: u.Name, Password: u.Password, Permissions: p})
	}
	return nil
}

// StartEmbedded starts a NATS server with JetStream in-process (file storage under
// DataDir/jetstream, listening on loopback unless told otherwise) and waits, at most
// [EmbeddedReadyTimeout], until it accepts connections; its ClientURL method gives the URL
// for [ConnOptions]. The caller stops it with Shutdown and then WaitForShutdown. A server
// that logs a fatal error while starting (port in use, unusable storage) is shut down and
// its message returned.
func StartEmbedded(opts EmbeddedOptions) (*server.Server, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
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
	if err := opts.authorize(sopts); err != nil {
		return nil, err
	}
	s, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("service: configuring embedded NATS server: %w", err)
	}
	lg := &serverLogger{l: opts.Logger.With("component", "nats-server")}
	debug := opts.Logger.Enabled(context.Background(), slog.LevelDebug)
	s.SetLoggerV2(lg, debug, false, false)
	w := newDiskWatch(s, sopts.StoreDir, lg.l)
	lg.watch.Store(w)

	go s.Start()

	deadline := time.Now().Add(EmbeddedReadyTimeout)
	for {
		if msg := lg.fatal(); msg != "" {
			s.Shutdown()
			s.WaitForShutdown()
			return nil, fmt.Errorf("service: embedded NATS server on %s:%d failed to start: %s", opts.Host, opts.Port, msg)
		}
		if s.ReadyForConnections(50*time.Millisecond) && s.JetStreamEnabled() {
			watches.Store(s, w)
			go w.run()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Shutdown()
			s.WaitForShutdown()
			return nil, fmt.Errorf("%w: %s:%d did not accept connections with JetStream within %s", ErrEmbeddedNotReady, opts.Host, opts.Port, EmbeddedReadyTimeout)
		}
	}
}

// serverLogger adapts slog to server.Logger. It remembers the first fatal
// message so that StartEmbedded can report it, and tells the server's disk watch of the
// errors that say its disk is full.
type serverLogger struct {
	l        *slog.Logger
	mu       sync.Mutex
	fatalMsg string
	watch    atomic.Pointer[diskWatch]
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
func (g *serverLogger) Warnf(format string, v ...any)   { g.logf(slog.LevelWarn, format, v) }
func (g *serverLogger) Errorf(format string, v ...any)  { g.logf(slog.LevelError, format, v) }

// logf logs a warning or an error, and tells the disk watch of one that says the disk is
// full.
func (g *serverLogger) logf(level slog.Level, format string, v []any) {
	if w := g.watch.Load(); w != nil {
		if msg := fmt.Sprintf(format, v...); serverDiskFull(msg) {
			w.note(strings.TrimSpace(msg))
		}
	}
	logf(g.l, level, format, v)
}
func (g *serverLogger) Debugf(format string, v ...any) { logf(g.l, slog.LevelDebug, format, v) }
func (g *serverLogger) Tracef(format string, v ...any) { logf(g.l, slog.LevelDebug, format, v) }

func (g *serverLogger) Fatalf(format string, v ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, v...))
	g.mu.Lock()
	if g.fatalMsg == "" {
		g.fatalMsg = msg
	}
	g.mu.Unlock()
	g.l.Error(msg, "fatal", true)
}
