// Command gen writes the committed modules of the hostile-module corpus (package hostile):
// NAME.wasm and its listing NAME.wat for each, into the directory given (default
// runtime/internal/host/testdata/hostile, run from the repository root, as `make fixtures`
// does).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/groupstate/groupstate/runtime/internal/host/hostile"
)

func main() {
	dir := flag.String("dir", "runtime/internal/host/testdata/hostile", "where to write the modules")
	flag.Parse()
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, m := range hostile.Corpus() {
		if !m.Committed {
			continue
		}
		for name, data := range map[string][]byte{m.Name + ".wasm": m.Wasm(), m.Name + ".wat": []byte(m.Listing())} {
			if err := os.WriteFile(filepath.Join(*dir, name), data, 0o644); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
	}
}
