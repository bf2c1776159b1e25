package engine_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/internal/pybuild"
	"github.com/groupstate/groupstate/runtime/scenario"
)

// sampleModules returns the modules of a sample in every language:
// samples/<name>/<language>/<name>.wasm, and for Python (issue 31), whose samples are not
// committed as modules, the module internal/pybuild makes of samples/<name>/python/*.py with
// the committed runtime module.
func sampleModules(t *testing.T, name string) map[string]string {
	files, err := filepath.Glob(filepath.Join("../../samples", name, "*", name+".wasm"))
	require(t, err)
	mods := map[string]string{}
	for _, f := range files {
		mods[filepath.Base(filepath.Dir(f))] = f
	}
	if py := filepath.Join("../../samples", name, "python", name+".py"); fileExists(py) {
		mods["python"] = buildPython(t, filepath.Dir(py), name)
	}
	if mods["go"] == "" {
		t.Fatalf("sample %s has no Go module", name)
	}
	return mods
}

// canonicalLines turns printed rows into canonical JSON, in order, so modules that write the
// same values with other spacing or field order compare equal.
func canonicalLines(t *testing.T, out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		c, err := scenario.Canonical(json.RawMessage(l))
		require(t, err, l)
		lines = append(lines, c)
	}
	return lines
}

// TestConformance runs every sample module of every language through the same scenarios
// (the sample's own and, for logincount and sessions, the public ones) and requires output
// identical to the Go module's, row for row in emission order.
func TestConformance(t *testing.T) {
	samples, err := filepath.Glob("../../samples/*/*.yaml")
	require(t, err)
	languages := map[string]bool{}
	for _, sp := range samples {
		name := strings.TrimSuffix(filepath.Base(sp), ".yaml")
		cases := []scenarioCase{{name, sp, strings.TrimSuffix(sp, ".yaml") + ".jsonl"}}
		if pub := filepath.Join("testdata/public", name+".public.jsonl"); fileExists(pub) {
			cases = append(cases, scenarioCase{"public/" + name, filepath.Join("testdata/public", name+".yaml"), pub})
		}
		mods := sampleModules(t, name)
		for _, c := range cases {
			steps := parseSteps(t, c.file)
			want := canonicalLines(t, runScenarioWith(t, c, mods["go"], steps))
			for lang, mod := range mods {
				languages[lang] = true
				t.Run(c.name+"/"+lang, func(t *testing.T) {
					got := canonicalLines(t, runScenarioWith(t, c, mod, withRestarts(steps)))
					if strings.Join(got, "\n") != strings.Join(want, "\n") {
						t.Fatalf("%s differs from go:\n%s\nwant:\n%s", lang, strings.Join(got, "\n"), strings.Join(want, "\n"))
					}
				})
			}
		}
	}
	t.Logf("languages: %v", languages)
}

// buildPython builds the Python handler of the .py files in dir, with entry "module" (the
// build's default: the function handle, else the StatefulProcessor subclass) or
// "module:name", into a module file and returns its path.
func buildPython(t *testing.T, dir, entry string) string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.py"))
	require(t, err)
	sources := map[string][]byte{}
	for _, p := range paths {
		sources[filepath.Base(p)] = readFile(t, p)
	}
	wasm, err := pybuild.Build(sources, entry)
	require(t, err, dir)
	mod, _, _ := strings.Cut(entry, ":")
	out := filepath.Join(t.TempDir(), mod+".wasm")
	require(t, os.WriteFile(out, wasm, 0o644))
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
