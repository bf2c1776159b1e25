package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/scenario"
	"github.com/groupstate/groupstate/runtime/spec"
)

// scenarioCase is a scenario file with the spec it runs under.
type scenarioCase struct {
	name, sp, file string
}

// semanticsCases lists testdata/semantics: each .jsonl names its spec on its first line
// ("# spec: pt.yaml"); the probe module runs the operations its rows carry.
func semanticsCases(t *testing.T) []scenarioCase {
	files, err := filepath.Glob("testdata/semantics/*.jsonl")
	require(t, err)
	if len(files) == 0 {
		t.Fatal("no scenarios in testdata/semantics")
	}
	var cases []scenarioCase
	for _, f := range files {
		first, _, _ := strings.Cut(string(readFile(t, f)), "\n")
		sp, ok := strings.CutPrefix(first, "# spec: ")
		if !ok {
			t.Fatalf("%s: first line must be \"# spec: FILE\"", f)
		}
		cases = append(cases, scenarioCase{filepath.Base(f), filepath.Join("testdata/semantics", sp), f})
	}
	return cases
}

// runScenario runs one scenario file and returns what it printed.
func runScenario(t *testing.T, c scenarioCase, steps []scenario.Step) string {
	t.Helper()
	return runScenarioWith(t, c, "", steps)
}

// runScenarioWith runs steps with the module at modPath (default: the spec's module, or for
// the public specs, which name no path, the Go sample).
func runScenarioWith(t *testing.T, c scenarioCase, modPath string, steps []scenario.Step) string {
	t.Helper()
	sp, specMod, err := spec.LoadSpec(c.sp)
	require(t, err)
	switch {
	case modPath != "":
	case strings.HasPrefix(c.name, "public/"):
		modPath = filepath.Join("../../samples", sp.Name, "go", sp.Name+".wasm")
	default:
		modPath = specMod
	}
	wasm := readFile(t, modPath)
	var initial *engine.InitialState
	if f := initialStateFile(c.file); f != "" {
		initial, err = engine.ParseInitialState(bytes.NewReader(readFile(t, f)))
		require(t, err, f)
	}
	var out bytes.Buffer
	err = scenario.RunSteps(context.Background(), scenario.Options{
		Spec: sp, Wasm: wasm, Runtime: sharedRuntime(t), StateDir: t.TempDir(), Out: &out,
		InitialState: initial,
	}, steps)
	require(t, err, c.file)
	return out.String()
}

// initialStateFile returns the initial-state file of a scenario file, NAME.initial.jsonl beside
// NAME.jsonl, or "" when there is none.
func initialStateFile(scenarioFile string) string {
	f := strings.TrimSuffix(scenarioFile, ".jsonl") + ".initial.jsonl"
	if !fileExists(f) {
		return ""
	}
	return f
}

func parseSteps(t *testing.T, file string) []scenario.Step {
	f, err := os.Open(file)
	require(t, err)
	defer f.Close()
	steps, err := scenario.Parse(bufio.NewReader(f))
	require(t, err)
	return steps
}

// withRestarts inserts a restart before every batch: a crash between any two batches must
// change nothing.
func withRestarts(steps []scenario.Step) []scenario.Step {
	var out []scenario.Step
	for _, s := range steps {
		if s.At != nil {
			out = append(out, scenario.Step{Line: s.Line, Restart: true})
		}
		out = append(out, s)
	}
	return out
}

func TestSemantics(t *testing.T) {
	for _, c := range semanticsCases(t) {
		t.Run(c.name, func(t *testing.T) {
			steps := parseSteps(t, c.file)
			plain := runScenario(t, c, steps)
			if plain == "" {
				t.Fatal("scenario emitted nothing; it tests nothing")
			}
			if restarted := runScenario(t, c, withRestarts(steps)); restarted != plain {
				t.Fatalf("restarts changed the output:\nwithout:\n%s\nwith:\n%s", plain, restarted)
			}
		})
	}
}
