package engine_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoNATSNoPrometheus: the embeddable engine links no NATS client or server, and neither it
// nor any package it imports uses Prometheus. The one exception is Pebble (the state store),
// which imports the Prometheus client library for its own histograms: that is Pebble's
// business and registers nothing, so only Pebble's packages may import it.
func TestNoNATSNoPrometheus(t *testing.T) {
	out, err := exec.Command(goTool(t), "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", ".").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	pkgs := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		pkgs++
		if strings.Contains(pkg, "nats-io") {
			t.Errorf("package engine depends on %s", pkg)
		}
		if strings.Contains(pkg, "prometheus") || strings.HasPrefix(pkg, "github.com/cockroachdb/pebble/") {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if strings.Contains(imp, "prometheus") {
				t.Errorf("package engine depends on %s, which imports %s", pkg, imp)
			}
		}
	}
	if pkgs < 10 {
		t.Fatalf("go list -deps listed %d packages: %s", pkgs, out)
	}
}

// goTool returns the go command on PATH: go test puts the GOROOT/bin of the toolchain running
// the test first on PATH. (runtime.GOROOT is deprecated for this.) A test binary run by hand
// without a go command skips the test.
func goTool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	return p
}
