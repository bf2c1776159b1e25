package state

import (
	"context"
	"fmt"
	"log/slog"
)

// pebbleLogger routes Pebble's logging to slog: Infof at Debug (Pebble is
// chatty about WAL recovery and compactions), Errorf at Error. Fatalf logs
// at Error and panics with a *fatalError instead of exiting the process;
// Batch.Commit recovers it and marks the store failed.
type pebbleLogger struct {
	l *slog.Logger
}

// fatalError is the panic value of pebbleLogger.Fatalf.
type fatalError struct {
	msg string
}

func (e *fatalError) Error() string { return e.msg }

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l.Enabled(context.Background(), slog.LevelDebug) {
		p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble", "fatal", true)
	panic(&fatalError{msg: msg})
}
