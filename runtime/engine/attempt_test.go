package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
)

// crashOn is a slog.Handler that ends the process at once (exit code 3, no deferred
// function, like a kill) when it sees the message msg: the probe's log op stands for a call
// that brings the whole process down, which no error can report.
type crashOn struct{ msg string }

func (c crashOn) Enabled(context.Context, slog.Level) bool { return true }
func (c crashOn) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c crashOn) WithGroup(string) slog.Handler            { return c }
func (c crashOn) Handle(_ context.Context, r slog.Record) error {
	if r.Message == c.msg {
		os.Exit(3)
	}
	return nil
}

// attemptChild is TestCrashLoopIsolates's child process: it runs one batch on the store in
// dir and prints what it delivered, one JSON line per entry.
func attemptChild(dir string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	st, err := state.Open(dir, nil)
	if err != nil {
		fail(err)
	}
	rt, err := engine.New(engine.Options{CacheDir: cacheDir(), Logger: slog.New(crashOn{"crash now"})}) // each child compiles the probe once per test run, not once per child
	if err != nil {
		fail(err)
	}
	wasm, err := os.ReadFile("testdata/probe/probe.wasm")
	if err != nil {
		fail(err)
	}
	sp, err := spec.ParseSpec([]byte(strings.TrimSpace(budgetSpec)))
	if err != nil {
		fail(err)
	}
	sink := &collector{}
	eng, err := rt.NewEngine(context.Background(), engine.Config{Spec: sp, Wasm: wasm, Store: st, Sink: sink})
	if err != nil {
		fail(err)
	}
	in := rows(`{"k":"a","ops":[{"emit":1}]}`, `{"k":"boom","ops":[{"log":"crash now"}]}`, `{"k":"b","ops":[{"emit":2}]}`)
	if _, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 1000, Position: 3, Rows: in}); err != nil {
		fail(err)
	}
	for _, kind := range []state.OutboxKind{state.OutboxOutput, state.OutboxDeadLetter} {
		for _, en := range sink.take(kind) {
			line, _ := json.Marshal(map[string]string{"key": string(en.Key), "payload": string(en.Payload), "reason": en.Reason, "error": en.Error})
			fmt.Println(string(line))
		}
	}
	if msg := eng.Isolating(); msg != "" {
		fail(fmt.Errorf("still isolating after the commit: %s", msg))
	}
	if err := eng.Close(context.Background()); err != nil {
		fail(err)
	}
	if err := st.Close(); err != nil {
		fail(err)
	}
}

// TestCrashLoopIsolates: a batch whose call brings the process down (a crash no error
// reports) does not bring it down forever: each engine records its attempt before calling the
// handler; after IsolateAfter attempts without a commit the next engine runs the batch's keys
// one at a time, recording each first; the engine after the crash it meets quarantines the key
// that was running, and the batch commits with the other keys' outputs and the culprit's rows
// dead-lettered (reason quarantined).
func TestCrashLoopIsolates(t *testing.T) {
	if dir := os.Getenv("GS_ATTEMPT_CHILD"); dir != "" {
		attemptChild(dir)
		os.Exit(0)
	}
	dir := t.TempDir()
	var codes []int
	var out string
	for range engine.IsolateAfter + 3 {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashLoopIsolates$")
		cmd.Env = append(os.Environ(), "GS_ATTEMPT_CHILD="+dir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, code)
		if code != 3 {
			if code != 0 {
				t.Fatalf("child exited %d: %s", code, stderr.String())
			}
			out = string(b)
			break
		}
	}
	// IsolateAfter crashes with every key in one call, one more in isolation at "boom", then
	// the batch commits.
	want := fmt.Sprint(append(slicesRepeat(3, engine.IsolateAfter+1), 0))
	if fmt.Sprint(codes) != want {
		t.Fatalf("exit codes %v, want %s", codes, want)
	}
	for _, w := range []string{`"key":"\"a\"","payload":"1"`, `"key":"\"b\"","payload":"2"`, `"key":"\"boom\""`, `"reason":"quarantined"`, `the runtime stopped while it ran this key alone`} {
		if !strings.Contains(out, w) {
			t.Errorf("the committed batch delivered\n%s\nwithout %s", out, w)
		}
	}
}

func slicesRepeat(v, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}
