package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/internal/pybuild"
	"github.com/groupstate/groupstate/internal/toolchain"
)

// newBuildCommand returns `groupstate build`, which builds a handler project's module with its
// language's toolchain (package toolchain).
func newBuildCommand() *cobra.Command {
	var lang, out, sdk, entry string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "build [DIR] [--lang go|rust|c|assemblyscript] [-o OUT.wasm] [--sdk CHECKOUT] | build --lang python FILE.py [FILE.py ...] [-o OUT.wasm] [--entry NAME]",
		Short: "Build a handler project (default .) into its WebAssembly module, in any language",
		Long: `Builds the handler project in DIR (default .) into a WebAssembly module with its language's
own toolchain and the exact flags of the groupstate repository's Makefile, and prints
"built OUT (N KB) in Xs". No make is needed.

The language is --lang, else found from DIR's files: go.mod is Go; Cargo.toml or src/lib.rs
is Rust; package.json, asconfig.json or a .ts file is AssemblyScript; a .c file is C.

  go              GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false
  rust            rustc --target wasm32-wasip1 (or wasm32-wasi) for the SDK sdk/rust and then
                  src/lib.rs as a cdylib; no cargo, no crates (the first rustc on PATH, or
                  $RUSTC, that has the target)
  c               clang --target=wasm32-wasi -mexec-model=reactor with wasi-libc and sdk/c,
                  every .c file of DIR
  assemblyscript  asc --runtime minimal --exportStart _initialize, the one .ts file of DIR,
                  with the project's compiler (package.json) or the checkout's pinned one

OUT defaults to the module: of the one deployment spec (*.yaml) in DIR, else DIR's name with
.wasm. Rust, C and AssemblyScript use the SDK of a groupstate checkout: --sdk, else
$GROUPSTATE_CHECKOUT, else the one a "groupstate init" project's Makefile names, else the
first checkout at or above DIR, the current directory or this executable. Go projects name
theirs in go.mod.

Python (--lang python, .py files as arguments, or a DIR with .py files and no other
language's) needs no toolchain: the handler's files, with the groupstate package, go into the
Python runtime module that this executable carries (CPython 3.11 built for WASI; sdk/python).
Given files, the first is the handler's module, whose function or class --entry is the entry
point (default: the function handle, applyInPandasWithState's, an ABI v1 module; else the one
class that subclasses StatefulProcessor, transformWithState's, an ABI v2 module; a class named
by --entry is a processor), and the others are modules it imports, by their paths relative to the first
file's directory; OUT defaults to the first file's name with .wasm. Given a DIR, every .py
file under it goes in, and the entry is in NAME.py, NAME being OUT's name (else the one .py
file at DIR's top).

Before it runs anything it checks the whole toolchain (compiler, linker, WebAssembly target
and libraries) and, when a part is missing, says in one line what and how to install it.`,
		Example: `  groupstate build
  groupstate build ~/src/logins -o /tmp/logins.wasm
  groupstate build --lang c --sdk ~/src/groupstate
  groupstate build --lang python handler.py helpers.py -o handler.wasm`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (lang == "python" || lang == "") && len(args) > 0 && strings.HasSuffix(args[0], ".py") {
				return runPythonBuild(cmd, args, out, entry)
			}
			if len(args) > 1 {
				return fmt.Errorf("accepts at most 1 arg(s), received %d (one project directory; Python handlers take .py files: groupstate build --lang python FILE.py ...)", len(args))
			}
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			if lang == "python" || (lang == "" && pythonProject(dir)) {
				return runPythonDirBuild(cmd, dir, out, entry)
			}
			if entry != "" {
				return errors.New("--entry is for Python handlers (--lang python)")
			}
			return runBuild(cmd, dir, lang, out, sdk, verbose)
		},
	}
	cmd.Flags().StringVar(&lang, "lang", "", "handler language: go, rust, c, assemblyscript or python (default: found from DIR's files)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "the module to write (default: the spec's module:, else DIR/<DIR's name>.wasm)")
	cmd.Flags().StringVar(&sdk, "sdk", "", "groupstate checkout whose SDK a Rust, C or AssemblyScript project uses")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print each command before running it")
	cmd.Flags().StringVar(&entry, "entry", "", "Python: the entry function (ABI v1) or StatefulProcessor class (ABI v2) of the first file (default: handle, else the one StatefulProcessor subclass)")
	return cmd
}

// runBuild builds the project in dir and prints the closing line.
func runBuild(cmd *cobra.Command, dir, lang, out, sdk string, verbose bool) error {
	p := toolchain.Project{Dir: dir, Lang: toolchain.Lang(lang), Out: out, SDK: buildSDK(dir, sdk)}
	res, err := toolchain.Build(cmd.Context(), p, cmd.OutOrStdout(), cmd.ErrOrStderr(), verbose)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "built %s (%d KB) in %.1fs\n", shownPath(res.Out), (res.Size+1023)/1024, res.Took.Seconds())
	return nil
}

// runPythonBuild writes the module of the Python handler made of files (internal/pybuild): the
// first is the entry's module, the others are named by their paths relative to its directory.
func runPythonBuild(cmd *cobra.Command, files []string, out, entry string) error {
	if len(files) == 0 {
		return errors.New("build --lang python: name the handler's .py files")
	}
	root := filepath.Dir(files[0])
	sources := map[string][]byte{}
	for _, f := range files {
		if !strings.HasSuffix(f, ".py") {
			return fmt.Errorf("build --lang python: %s is not a .py file", f)
		}
		rel, err := filepath.Rel(root, f)
		if err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("build --lang python: %s is not under %s, the first file's directory", f, root)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		sources[filepath.ToSlash(rel)] = b
	}
	if out == "" {
		out = strings.TrimSuffix(files[0], ".py") + ".wasm"
	}
	return writePythonModule(cmd, sources, strings.TrimSuffix(filepath.Base(files[0]), ".py"), entry, out)
}

// pythonProject reports whether dir is a Python handler project: .py files and none of the
// other languages' marks (toolchain.Detect finds no project).
func pythonProject(dir string) bool {
	if _, err := toolchain.Detect(dir); !errors.Is(err, toolchain.ErrNoProject) {
		return false
	}
	m, _ := filepath.Glob(filepath.Join(dir, "*.py"))
	return len(m) > 0
}

// runPythonDirBuild builds the Python project in dir: every .py file under it (its import
// path is its path in dir), with the entry in NAME.py, NAME being the module's name (the
// spec's module:, else the directory's name), or in the one .py file at the top.
func runPythonDirBuild(cmd *cobra.Command, dir, out, entry string) error {
	if out == "" {
		out = toolchain.DefaultOut(dir)
	}
	sources := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && (strings.HasPrefix(d.Name(), ".") || d.Name() == "__pycache__") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".py") {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		sources[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		return err
	}
	main := strings.TrimSuffix(filepath.Base(out), ".wasm")
	if _, ok := sources[main+".py"]; !ok {
		var top []string
		for name := range sources {
			if !strings.Contains(name, "/") {
				top = append(top, name)
			}
		}
		if len(top) != 1 {
			return fmt.Errorf("build --lang python: %s has no %s.py (the module's name) and %d .py files at its top; name the files: groupstate build --lang python MAIN.py [OTHER.py ...]", dir, main, len(top))
		}
		main = strings.TrimSuffix(top[0], ".py")
	}
	return writePythonModule(cmd, sources, main, entry, out)
}

// writePythonModule builds the module of sources with the entry module:NAME (NAME "": the
// function handle, else the one StatefulProcessor subclass; pybuild.Entry) and writes it to
// out, with build's closing line.
func writePythonModule(cmd *cobra.Command, sources map[string][]byte, module, entry, out string) error {
	start := time.Now()
	wasm, err := pybuild.Build(sources, module+":"+entry)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, wasm, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "built %s (%d KB) in %.1fs\n", shownPath(out), (len(wasm)+1023)/1024, time.Since(start).Seconds())
	return nil
}

// buildSDK returns the checkout a build of dir takes its SDK from: sdk, else
// $GROUPSTATE_CHECKOUT, else the one dir's Makefile (of groupstate init) names, else the first
// checkout at or above dir, the current directory or the executable; or "".
func buildSDK(dir, sdk string) string {
	if sdk != "" {
		return sdk
	}
	if env := os.Getenv("GROUPSTATE_CHECKOUT"); env != "" {
		return env
	}
	if mk := toolchain.MakefileCheckout(dir); mk != "" {
		return mk
	}
	if abs, err := filepath.Abs(dir); err == nil {
		if r := walkUpToCheckout(abs); r != "" {
			return r
		}
	}
	root, _, _ := findCheckout("")
	return root
}

// shownPath is p relative to the current directory when it is under it, else p.
func shownPath(p string) string {
	if cwd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(cwd, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
	}
	return p
}
