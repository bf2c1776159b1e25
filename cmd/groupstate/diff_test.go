package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/replay"
	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/runtime/spec"
)

// TestDiffRefuses: `groupstate diff` exits 2, saying why, when SHADOW is not a shadow of NAME
// or is not deployed, and 1 (usage) without both names. Deploying through the client only
// writes the registry: no runtime runs.
func TestDiffRefuses(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	srv, err := service.StartEmbedded(service.EmbeddedOptions{DataDir: t.TempDir(), Port: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := service.Connect(service.ConnOptions{URL: srv.ClientURL(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c, err := client.New(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	sp, wasm, err := loadSpecAndModule(inRepo("samples/logincount/logincount.yaml"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"logincount", "logincount-v2"} {
		s := *sp
		s.Name = name
		if _, err := c.Deploy(context.Background(), &s, wasm); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"not a shadow", []string{"logincount", "logincount-v2"}, 2, "groupstate: logincount-v2 is not a shadow of logincount (promoted already?)\n"},
		{"not deployed", []string{"logincount", "nosuch"}, 2, "groupstate: no such deployment: \"nosuch\"\n"},
		{"one name", []string{"logincount"}, 1, "groupstate: accepts 2 arg(s), received 1\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, append([]string{"diff", "--server", srv.ClientURL()}, tc.args...)...)
			if code != tc.code || !strings.HasPrefix(stderr, tc.stderr) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d and %q", code, stdout, stderr, tc.code, tc.stderr)
			}
		})
	}
}

// TestCheckShadowOf: diff runs only for a deployment the registry records as a shadow of the
// primary named.
func TestCheckShadowOf(t *testing.T) {
	tests := []struct {
		shadowOf string
		want     string // "" when accepted
	}{
		{"primary", ""},
		{"", "groupstate: s is not a shadow of primary (promoted already?)"},
		{"other", "groupstate: s is not a shadow of primary but of other"},
	}
	for _, tc := range tests {
		err := checkShadowOf(&client.Deployment{Name: "s", Spec: &spec.Spec{Name: "s"}, ShadowOf: tc.shadowOf}, "primary")
		var got string
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("ShadowOf %q: %q, want %q", tc.shadowOf, got, tc.want)
		}
		if ex, ok := err.(*exitError); err != nil && (!ok || ex.code != 2) {
			t.Errorf("ShadowOf %q: %#v, want exit 2", tc.shadowOf, err)
		}
	}
}

// TestPrintDiff: diff's summary names the shadow and its primary, then prints the counts and
// differences as replay does.
func TestPrintDiff(t *testing.T) {
	var b strings.Builder
	printDiff(&b, "logincount", "logincount-v2", &replay.Report{Batches: 3, Compared: 3, Rows: 5, Keys: 2, Equal: 2, Changed: 1,
		Differences: []replay.Difference{{Batch: 7, Key: json.RawMessage(`"ada"`), Old: []json.RawMessage{[]byte(`1`)}, New: []json.RawMessage{[]byte(`2`)}}}})
	want := `compared 3 batches of logincount-v2 with logincount (5 input rows), 2 keys; old: logincount's outputs, new: logincount-v2's
output rows: 2 equal, 1 changed, 0 only old, 0 only new
first difference of each key:
  key "ada", batch 7 (partition 0):
    old: [1]
    new: [2]
`
	if b.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestProgressLineNotTerminal: written to a file or a pipe, progress is whole lines, the last
// always, and no carriage returns.
func TestProgressLineNotTerminal(t *testing.T) {
	var buf bytes.Buffer
	progress := progressLine(&buf, "batch")
	for done := 1; done <= 5; done++ {
		progress(done, 5)
	}
	if got := buf.String(); got != "batch 5 of 5\n" {
		t.Fatalf("progress to a buffer: %q", got)
	}
}
