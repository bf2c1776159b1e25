package layers_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/groupstate/groupstate/"

// rule forbids the packages matched by from to depend on (directly or through others) any
// package matched by to.
type rule struct {
	from, to []string // patterns: a path relative to the module ("state"), "x/..." for x and below, or a full path prefix ending in "/..."
	except   []string // packages of from the rule does not hold for (patterns as from's)
	why      string
}

var rules = []rule{
	{
		from: []string{"runtime/engine", "state", "timeouts", "abi", "runtime/spec", "runtime/scenario",
			"runtime/internal/handler", "runtime/internal/host/...", "runtime/internal/partition",
			"runtime/internal/placement", "runtime/auth", "runtime/internal/topology", "runtime/internal/rowjson", "runtime/internal/subject", "internal/leb"},
		to:  []string{"github.com/nats-io/..."},
		why: "the engine, the state store and pure decisions link no NATS: they are embeddable and testable without a server",
	},
	{
		from: []string{"runtime/internal/..."},
		to:   []string{"runtime/service", "runtime/bench", "runtime/replay"},
		why:  "implementation packages serve the public ones; they never reach up into them",
	},
	{
		from:   []string{"runtime/internal/..."},
		except: []string{"runtime/internal/runner"},
		to:     []string{"runtime/client"},
		why:    "implementation packages never reach up into the client; the runner alone writes the status document, whose type (client.Status) the client defines for its readers",
	},
	{
		from: []string{"runtime/client"},
		to:   []string{"runtime/service"},
		why:  "a program that reads status or deploys links no runtime",
	},
	{
		from: []string{"..."},
		to:   []string{"cmd/..."},
		why:  "commands are leaves: nothing imports them",
	},
	{
		from: []string{"sdk/...", "samples/..."},
		to:   []string{"runtime/...", "state", "github.com/nats-io/..."},
		why:  "handlers compile to WASM against the ABI alone",
	},
}

// match reports whether pkg (a full import path) matches pattern.
func match(pattern, pkg string) bool {
	if !strings.HasPrefix(pattern, "github.com/") {
		pattern = module + pattern
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

func matchAny(patterns []string, pkg string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, pkg) })
}

// TestLayers checks every rule against the import graph of the module's packages (tests
// excluded: a test may import what it exercises).
func TestLayers(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH: %v", err) // go test puts its toolchain's bin first on PATH
	}
	cmd := exec.Command(goCmd, "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...")
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		imports[fields[0]] = fields[1:]
	}
	ours := 0
	for pkg := range imports {
		if strings.HasPrefix(pkg, module) {
			ours++
		}
	}
	if ours < 30 {
		t.Fatalf("go list found %d of groupstate's packages; expected the whole module", ours)
	}
	for _, r := range rules {
		for pkg := range imports {
			if !strings.HasPrefix(pkg, module) || !matchAny(r.from, pkg) || matchAny(r.except, pkg) {
				continue
			}
			if path := forbiddenPath(imports, pkg, r.to); path != nil {
				t.Errorf("%s depends on %s (%s): %s", strings.TrimPrefix(pkg, module),
					strings.TrimPrefix(path[len(path)-1], module), strings.Join(path, " -> "), r.why)
			}
		}
	}
}

// forbiddenPath returns an import path from pkg to a package matched by to (nil: none), by a
// breadth-first walk of the graph.
func forbiddenPath(imports map[string][]string, pkg string, to []string) []string {
	prev := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range imports[p] {
			if _, seen := prev[imp]; seen {
				continue
			}
			prev[imp] = p
			if matchAny(to, imp) {
				var path []string
				for q := imp; q != ""; q = prev[q] {
					path = append([]string{q}, path...)
				}
				return path
			}
			queue = append(queue, imp)
		}
	}
	return nil
}

// TestRulesBite: each rule catches what it forbids (a rule whose patterns match nothing would
// pass for ever).
func TestRulesBite(t *testing.T) {
	cases := []struct {
		from, to string
		rule     int
	}{
		{module + "runtime/engine", "github.com/nats-io/nats.go", 0},
		{module + "runtime/internal/host/hostile", "github.com/nats-io/nats.go/jetstream", 0},
		{module + "runtime/internal/runner", module + "runtime/service", 1},
		{module + "runtime/internal/cluster", module + "runtime/client", 2},
		{module + "runtime/client", module + "runtime/service", 3},
		{module + "runtime/service", module + "cmd/groupstate", 4},
		{module + "samples/counter/go", module + "runtime/engine", 5},
	}
	for _, c := range cases {
		r := rules[c.rule]
		graph := map[string][]string{c.from: {c.to}}
		if !matchAny(r.from, c.from) || matchAny(r.except, c.from) || forbiddenPath(graph, c.from, r.to) == nil {
			t.Errorf("rule %d (%s) lets %s import %s", c.rule, r.why, c.from, c.to)
		}
	}
	// The exception is as narrow as it says: the runner may import the client, nothing else.
	if r := rules[2]; !matchAny(r.except, module+"runtime/internal/runner") || matchAny(r.except, module+"runtime/internal/runner/sub") {
		t.Errorf("rule 2's exception is %v; want the runner package alone", r.except)
	}
}
