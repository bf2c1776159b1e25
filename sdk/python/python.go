// Package python holds the Python SDK (issue 31) for Go programs: the CPython runtime module
// that runs Python handlers (runtime/python.wasm, built by runtime/build.sh from Debian's
// source package) and the groupstate package that runs inside it (groupstate/*.py).
// internal/pybuild puts a handler's sources and these into one module.
package python

import (
	"embed"
	"io/fs"
)

// Runtime is the CPython 3.11 runtime module: a WASI reactor exporting groupstate's ABI (v1,
// or v2 when internal/pybuild says so in its sources slot), with the standard library of
// runtime/frozen.txt frozen in and no handler sources. It also carries the bytecode of the
// groupstate package (compiled from groupstate/*.py when it was built), which it runs when the
// embedded package is that text.
//
//go:embed runtime/python.wasm
var Runtime []byte

//go:embed groupstate/*.py
var sdk embed.FS

// SDK returns the files of the groupstate Python package, by import path
// ("groupstate/__init__.py", ...).
func SDK() (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(sdk, "groupstate", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := sdk.ReadFile(p)
		files[p] = b
		return err
	})
	return files, err
}
