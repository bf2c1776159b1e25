package state

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// recordingHandler keeps the records it is given.
type recordingHandler struct {
	mu      sync.Mutex
	level   slog.Level
	records []slog.Record
}

func (h *recordingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func TestPebbleLoggingIsQuiet(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		h := &recordingHandler{level: level}
		fs := vfs.NewMem()
		var tuned bool
		for i := 0; i < 2; i++ { // the second Open replays the WAL
			s, err := Open("db", &Options{FS: fs, Logger: slog.New(h), Tune: func(*pebble.Options) { tuned = true }})
			requireNoError(t, err)
			commit(t, s.Deployment("log"), uint64(i+1), map[string]Entry{"k": val("v")})
			requireNoError(t, s.Close())
		}
		requireEqual(t, true, tuned)
		h.mu.Lock()
		for _, r := range h.records {
			if r.Level >= slog.LevelInfo {
				t.Errorf("pebble logged at %v: %s", r.Level, r.Message)
			}
		}
		h.mu.Unlock()
	}
}

func TestPebbleLoggerFatalPanics(t *testing.T) {
	h := &recordingHandler{level: slog.LevelDebug}
	defer func() {
		r := recover()
		if _, ok := r.(*fatalError); !ok {
			t.Fatalf("recovered %v, want *fatalError", r)
		}
		requireEqual(t, 1, len(h.records))
		requireEqual(t, slog.LevelError, h.records[0].Level)
	}()
	pebbleLogger{l: slog.New(h)}.Fatalf("boom %d", 1)
}
