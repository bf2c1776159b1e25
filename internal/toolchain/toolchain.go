// Package toolchain builds a groupstate handler project into a WebAssembly module with its
// language's own compiler, with the exact flags the repository's Makefile and mk/*.mk use:
// Go's go build for wasip1 (a c-shared reactor), plain rustc for wasm32-wasi(p1) against the
// SDK in sdk/rust, clang for wasm32-wasi with wasi-libc and sdk/c, and the pinned AssemblyScript
// compiler asc. It is what `groupstate build` runs.
//
// Before it runs anything, [Plan] checks the whole toolchain (compiler, linker, target library,
// sysroot) and returns a [*MissingError], which wraps [ErrMissing], naming the first part that
// is missing and how to install it, in one line.
package toolchain

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Lang is a handler language.
type Lang string

// The handler languages.
const (
	Go             Lang = "go"
	Rust           Lang = "rust"
	C              Lang = "c"
	AssemblyScript Lang = "assemblyscript"
)

// Langs are the handler languages, in the order Detect tries them.
var Langs = []Lang{Go, Rust, AssemblyScript, C}

// RequireEnv is the environment variable that, when true (1), turns a test's skip for a
// missing toolchain into a failure; CI sets it after installing the toolchains.
const RequireEnv = "GROUPSTATE_REQUIRE_TOOLCHAINS"

// Required reports whether RequireEnv is true; unset or empty is false, and a value that is no
// boolean is an error, so that a typo cannot turn CI's failures into skips.
func Required() (bool, error) {
	v := os.Getenv(RequireEnv)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q is not 1 or 0", RequireEnv, v)
	}
	return b, nil
}

var (
	// ErrMissing is wrapped by the *MissingError of a toolchain part that is not installed.
	ErrMissing = errors.New("toolchain: missing")
	// ErrUnknownLang is returned for a language name that is not one of Langs.
	ErrUnknownLang = errors.New("toolchain: unknown language")
	// ErrNoProject is returned by Detect for a directory that holds no handler project.
	ErrNoProject = errors.New("toolchain: no handler project")
	// ErrNoSDK is returned by Plan when a language needs a groupstate checkout's SDK
	// (Rust, C, AssemblyScript) and Project.SDK is not one.
	ErrNoSDK = errors.New("toolchain: no groupstate SDK")
)

// MissingError says which part of a language's toolchain is missing and how to install it.
// It wraps ErrMissing; its message is one line.
type MissingError struct {
	Lang    Lang   // the language whose toolchain is incomplete
	What    string // what is missing, e.g. "rustc not found on PATH"
	Install string // how to install it
}

// Error is "LANG: WHAT; INSTALL".
func (e *MissingError) Error() string {
	return fmt.Sprintf("%s: %s; %s", e.Lang, e.What, e.Install)
}

// Unwrap returns ErrMissing.
func (e *MissingError) Unwrap() error { return ErrMissing }

// ParseLang returns the language named s: go, rust, c or assemblyscript (also as or ts).
func ParseLang(s string) (Lang, error) {
	switch l := Lang(strings.ToLower(s)); l {
	case Go, Rust, C, AssemblyScript:
		return l, nil
	case "as", "ts":
		return AssemblyScript, nil
	}
	return "", fmt.Errorf("%w %q: use go, rust, c, assemblyscript or python (groupstate build builds python itself)", ErrUnknownLang, s)
}

// Detect returns the language of the handler project in dir, from its files: go.mod is Go;
// Cargo.toml or src/lib.rs is Rust; package.json, asconfig.json or a .ts file is
// AssemblyScript; a .c file is C. The first that matches, in that order, wins.
func Detect(dir string) (Lang, error) {
	has := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	switch {
	case has("go.mod"):
		return Go, nil
	case has("Cargo.toml"), has(filepath.Join("src", "lib.rs")):
		return Rust, nil
	case has("package.json"), has("asconfig.json"), len(tsSources(dir)) > 0:
		return AssemblyScript, nil
	case len(cSources(dir)) > 0:
		return C, nil
	}
	if fi, err := os.Stat(dir); err != nil {
		return "", err
	} else if !fi.IsDir() {
		return "", fmt.Errorf("%w: %s is not a directory", ErrNoProject, dir)
	}
	return "", fmt.Errorf("%w in %s: no go.mod, Cargo.toml, src/lib.rs, package.json, asconfig.json, .ts or .c file; pass --lang", ErrNoProject, dir)
}

// cSources returns the names of dir's .c files, sorted.
func cSources(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "*.c"))
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

// tsSources returns the names of dir's .ts files that are not declarations (.d.ts), sorted.
func tsSources(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "*.ts"))
	var out []string
	for _, p := range m {
		if !strings.HasSuffix(p, ".d.ts") {
			out = append(out, filepath.Base(p))
		}
	}
	return out
}

// Project is a handler project to build.
type Project struct {
	Dir  string // the project directory
	Lang Lang   // its language; "" means Detect(Dir)
	Out  string // the module to write; "" means DefaultOut(Dir)
	// SDK is the root of the groupstate checkout whose SDK the project uses (sdk/rust,
	// sdk/c, and the AssemblyScript compiler of sdk/assemblyscript). Go projects name theirs
	// in go.mod, a C project may have its own copy of groupstate.h, and an AssemblyScript
	// project with a package.json its own compiler: they need none.
	SDK string
}

// DefaultOut is the module a project in dir builds by default: the module: of its one
// deployment spec (a *.yaml or *.yml file in dir with a module field) when that is a .wasm
// file in dir, else the directory's name with .wasm.
func DefaultOut(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	var modules []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, p := range m {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			var s struct {
				Module string `yaml:"module"`
			}
			if yaml.Unmarshal(b, &s) == nil && s.Module != "" {
				modules = append(modules, s.Module)
			}
		}
	}
	if len(modules) == 1 && strings.HasSuffix(modules[0], ".wasm") && !strings.ContainsAny(modules[0], `/\`) {
		return filepath.Join(dir, modules[0])
	}
	return filepath.Join(dir, filepath.Base(abs)+".wasm")
}

// lookPath is exec.LookPath, or "" when file is not on PATH.
func lookPath(file string) string {
	p, err := exec.LookPath(file)
	if err != nil {
		return ""
	}
	return p
}

// Plan checks p's project files, its SDK and then its toolchain, and returns the commands that build it, in order, each with its
// directory and environment set and its output not yet set. A missing toolchain part is a
// *MissingError (errors.Is ErrMissing); a missing SDK is ErrNoSDK.
func Plan(p Project) ([]*exec.Cmd, error) {
	dir, err := filepath.Abs(p.Dir)
	if err != nil {
		return nil, err
	}
	if p.Lang == "" {
		if p.Lang, err = Detect(dir); err != nil {
			return nil, err
		}
	} else if p.Lang, err = ParseLang(string(p.Lang)); err != nil {
		return nil, err
	}
	if p.Out == "" {
		p.Out = DefaultOut(dir)
	}
	if p.Out, err = filepath.Abs(p.Out); err != nil {
		return nil, err
	}
	if p.SDK != "" {
		if p.SDK, err = filepath.Abs(p.SDK); err != nil {
			return nil, err
		}
	}
	switch p.Lang {
	case Go:
		return planGo(dir, p)
	case Rust:
		return planRust(dir, p)
	case C:
		return planC(dir, p)
	default:
		return planAssemblyScript(dir, p)
	}
}

// needSDK returns the SDK file rel of p's checkout, or ErrNoSDK.
func needSDK(p Project, rel string) (string, error) {
	if p.SDK == "" {
		return "", fmt.Errorf("%w: %s needs a groupstate checkout's %s; pass --sdk /path/to/groupstate", ErrNoSDK, p.Lang, rel)
	}
	f := filepath.Join(p.SDK, filepath.FromSlash(rel))
	if _, err := os.Stat(f); err != nil {
		return "", fmt.Errorf("%w: %s has no %s: is it a groupstate checkout?", ErrNoSDK, p.SDK, rel)
	}
	return f, nil
}

// command returns the command name args run in dir.
func command(dir, name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.Dir = dir
	return c
}

// goInstall says how to install Go.
const goInstall = "install Go from https://go.dev/dl"

func planGo(dir string, p Project) ([]*exec.Cmd, error) {
	goCmd := lookPath("go")
	if goCmd == "" {
		return nil, &MissingError{Go, "go not found on PATH", goInstall}
	}
	// The command of the Makefile's GO_MODULES rule.
	c := command(dir, goCmd, "build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false", "-o", p.Out, ".")
	c.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	return []*exec.Cmd{c}, nil
}

// rustInstall says how to install a Rust compiler with a WebAssembly target.
const rustInstall = "install with https://rustup.rs then 'rustup target add wasm32-wasip1', or on Debian 'apt-get install rustc libstd-rust-dev-wasm32'"

// rustTargets are the WASI preview 1 targets, newest name first (rustc 1.78 renamed
// wasm32-wasi to wasm32-wasip1, and 1.84 removed the old name).
var rustTargets = []string{"wasm32-wasip1", "wasm32-wasi"}

// Rustc returns the rustc that builds Rust handlers and its WASI preview 1 target
// (wasm32-wasip1, or wasm32-wasi for a rustc before 1.78): $RUSTC when set, else the first
// rustc on PATH (every one, in PATH order) that has the target's standard library and its
// linker rust-lld. What is missing is a *MissingError.
func Rustc() (rustc, target string, err error) {
	var candidates []string
	if r := os.Getenv("RUSTC"); r != "" {
		candidates = []string{r}
	} else {
		for _, d := range filepath.SplitList(os.Getenv("PATH")) {
			if d == "" {
				continue
			}
			if p, err := exec.LookPath(filepath.Join(d, "rustc")); err == nil && !slices.Contains(candidates, p) {
				candidates = append(candidates, p)
			}
		}
	}
	if len(candidates) == 0 {
		return "", "", &MissingError{Rust, "rustc not found on PATH", rustInstall}
	}
	var noLinker string
	for _, r := range candidates {
		out, err := exec.Command(r, "--print", "sysroot").Output()
		if err != nil {
			continue
		}
		sysroot := strings.TrimSpace(string(out))
		for _, t := range rustTargets {
			if _, err := os.Stat(filepath.Join(sysroot, "lib", "rustlib", t)); err != nil {
				continue
			}
			if rustLLD(r, sysroot) == "" {
				noLinker = r
				continue
			}
			return r, t, nil
		}
	}
	if noLinker != "" {
		return "", "", &MissingError{Rust, noLinker + " has a wasm32 WASI target but not its linker rust-lld (not beside it, in its sysroot or on PATH)",
			"rust-lld ships with rustc: reinstall the toolchain with rustup, or on Debian 'apt-get install rustc lld'"}
	}
	return "", "", &MissingError{Rust, fmt.Sprintf("no rustc has the wasm32-wasip1 or wasm32-wasi target (%s)", strings.Join(candidates, ", ")),
		"install it with 'rustup target add wasm32-wasip1', or on Debian 'apt-get install libstd-rust-dev-wasm32' for /usr/bin/rustc"}
}

// rustLLD returns the rust-lld that rustc at path (with sysroot) links wasm with, or "".
func rustLLD(rustc, sysroot string) string {
	cands := []string{filepath.Join(filepath.Dir(rustc), "rust-lld")}
	if m, _ := filepath.Glob(filepath.Join(sysroot, "lib", "rustlib", "*", "bin", "rust-lld")); len(m) > 0 {
		cands = append(cands, m...)
	}
	for _, c := range cands {
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return c
		}
	}
	return lookPath("rust-lld")
}

func planRust(dir string, p Project) ([]*exec.Cmd, error) {
	sdk, err := needSDK(p, "sdk/rust/src/lib.rs")
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "src", "lib.rs")); err != nil {
		return nil, fmt.Errorf("%w in %s: a Rust handler is src/lib.rs", ErrNoProject, dir)
	}
	rustc, target, err := Rustc()
	if err != nil {
		return nil, err
	}
	// The flags of mk/rust.mk: no debug info, no symbols, relative paths only.
	flags := []string{"--edition", "2021", "--target", target, "-C", "opt-level=s", "-C", "debuginfo=0",
		"-C", "strip=symbols", "-C", "panic=abort", "--remap-path-prefix=" + dir + "=."}
	rlibDir := filepath.Join(dir, "target", target)
	rlib := filepath.Join(rlibDir, "libgroupstate.rlib")
	crate := strings.NewReplacer("-", "_", ".", "_").Replace(strings.TrimSuffix(filepath.Base(p.Out), ".wasm"))
	lib := command(dir, rustc, append(slices.Clone(flags), "--crate-type=rlib", "--crate-name", "groupstate", "-C", "metadata=groupstate",
		"--remap-path-prefix="+p.SDK+"=groupstate", "-o", rlib, sdk)...)
	mod := command(dir, rustc, append(slices.Clone(flags), "--crate-type=cdylib", "--crate-name", crate, "-C", "lto=fat", "-C", "codegen-units=1",
		"-L", rlibDir, "--extern", "groupstate="+rlib, "-o", p.Out, filepath.Join("src", "lib.rs"))...)
	return []*exec.Cmd{lib, mod}, nil
}

// cInstall says how to install the C toolchain on Debian; major is clang's major version.
func cInstall(major string) string {
	rt := "libclang-rt-dev-wasm32"
	if major != "" {
		rt = "libclang-rt-" + major + "-dev-wasm32"
	}
	return "install it on Debian with 'apt-get install clang lld wasi-libc " + rt + "' (or use wasi-sdk and set WASI_SYSROOT)"
}

// wasiSysroot returns the --sysroot for wasi-libc: $WASI_SYSROOT, else /usr when Debian's
// wasi-libc is installed (/usr/lib/wasm32-wasi), else /usr/share/wasi-sysroot; or "".
func wasiSysroot() string {
	if s := os.Getenv("WASI_SYSROOT"); s != "" {
		return s
	}
	for _, c := range []struct{ root, probe string }{{"/usr", "/usr/lib/wasm32-wasi"}, {"/usr/share/wasi-sysroot", "/usr/share/wasi-sysroot/lib"}} {
		if _, err := os.Stat(c.probe); err == nil {
			return c.root
		}
	}
	return ""
}

// Clang returns the clang that builds C handlers and the --sysroot of wasi-libc, after checking
// clang's linker wasm-ld and its wasm32 builtins. What is missing is a *MissingError.
func Clang() (clang, sysroot string, err error) {
	clang = lookPath("clang")
	if clang == "" {
		return "", "", &MissingError{C, "clang not found on PATH", cInstall("")}
	}
	major := ""
	if out, err := exec.Command(clang, "-dumpversion").Output(); err == nil {
		major, _, _ = strings.Cut(strings.TrimSpace(string(out)), ".")
	}
	if ld, _ := exec.Command(clang, "-print-prog-name=wasm-ld").Output(); !filepath.IsAbs(strings.TrimSpace(string(ld))) && lookPath("wasm-ld") == "" {
		return "", "", &MissingError{C, "the WebAssembly linker wasm-ld (lld) not found beside clang or on PATH", cInstall(major)}
	}
	sysroot = wasiSysroot()
	if sysroot == "" {
		return "", "", &MissingError{C, "wasi-libc not found (no /usr/lib/wasm32-wasi or /usr/share/wasi-sysroot, and WASI_SYSROOT is not set)", cInstall(major)}
	}
	if rt, err := exec.Command(clang, "--target=wasm32-wasi", "-print-libgcc-file-name").Output(); err == nil {
		if _, err := os.Stat(strings.TrimSpace(string(rt))); err != nil {
			return "", "", &MissingError{C, "clang's wasm32 runtime library " + strings.TrimSpace(string(rt)) + " not found", cInstall(major)}
		}
	}
	return clang, sysroot, nil
}

func planC(dir string, p Project) ([]*exec.Cmd, error) {
	// The checkout's sdk/c, unless the project has its own copy of the header and no SDK.
	var include []string
	if _, err := os.Stat(filepath.Join(dir, "groupstate.h")); err != nil || p.SDK != "" {
		header, err := needSDK(p, "sdk/c/groupstate.h")
		if err != nil {
			return nil, err
		}
		include = []string{"-I" + filepath.Dir(header)}
	}
	srcs := cSources(dir)
	if len(srcs) == 0 {
		return nil, fmt.Errorf("%w in %s: no .c file", ErrNoProject, dir)
	}
	clang, sysroot, err := Clang()
	if err != nil {
		return nil, err
	}
	// The flags of mk/c.mk.
	args := []string{"--target=wasm32-wasi", "--sysroot=" + sysroot, "-mexec-model=reactor", "-O2", "-mbulk-memory", "-g0",
		"-Wall", "-Werror", "-ffile-prefix-map=" + dir + "/=", "-Wl,--stack-first", "-Wl,--strip-all"}
	args = append(append(args, include...), "-o", p.Out)
	return []*exec.Cmd{command(dir, clang, append(args, srcs...)...)}, nil
}

// asInstall says how to install AssemblyScript's compiler for the project in dir or the SDK's.
func asInstall(where string) string {
	return "AssemblyScript needs Node.js (https://nodejs.org, or on Debian 'apt-get install nodejs npm'), then 'npm ci' in " + where
}

func planAssemblyScript(dir string, p Project) ([]*exec.Cmd, error) {
	// The project's own compiler when it has a package.json, else the checkout's pinned one.
	where := dir
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		if _, err := needSDK(p, "sdk/assemblyscript/package.json"); err != nil {
			return nil, err
		}
		where = filepath.Join(p.SDK, "sdk", "assemblyscript")
	}
	node := lookPath("node")
	if node == "" {
		return nil, &MissingError{AssemblyScript, "node (Node.js) not found on PATH", asInstall(where)}
	}
	asc := filepath.Join(where, "node_modules", ".bin", "asc")
	if _, err := os.Stat(asc); err != nil {
		return nil, &MissingError{AssemblyScript, "the AssemblyScript compiler is not installed (no " + asc + ")", asInstall(where)}
	}
	srcs := tsSources(dir)
	if len(srcs) != 1 {
		return nil, fmt.Errorf("%w in %s: want one .ts entry file, found %d (%s)", ErrNoProject, dir, len(srcs), strings.Join(srcs, ", "))
	}
	// The flags of mk/assemblyscript.mk.
	return []*exec.Cmd{command(dir, node, asc, srcs[0], "-o", p.Out,
		"--runtime", "minimal", "--exportStart", "_initialize", "--use", "abort=__gs_abort", "-O3")}, nil
}

// Result is what Build built.
type Result struct {
	Out  string        // the module's absolute path
	Size int64         // its size in bytes
	Took time.Duration // how long the build took
}

// Build runs Plan(p)'s commands, their output going to stdout and stderr, and each command
// line first to stderr when verbose. It creates the directory of each command's output. A failing command's error names it.
func Build(ctx context.Context, p Project, stdout, stderr io.Writer, verbose bool) (Result, error) {
	start := time.Now()
	cmds, err := Plan(p)
	if err != nil {
		return Result{}, err
	}
	for _, c := range cmds {
		if verbose {
			fmt.Fprintln(stderr, c.String())
		}
		if err := os.MkdirAll(filepath.Dir(outOf(c)), 0o755); err != nil {
			return Result{}, err
		}
		run := exec.CommandContext(ctx, c.Path, c.Args[1:]...)
		run.Dir, run.Env, run.Stdout, run.Stderr = c.Dir, c.Env, stdout, stderr
		if err := run.Run(); err != nil {
			return Result{}, fmt.Errorf("%s failed: %w", filepath.Base(c.Path), err)
		}
	}
	out := cmds[len(cmds)-1]
	res := Result{Out: outOf(out), Took: time.Since(start)}
	fi, err := os.Stat(res.Out)
	if err != nil {
		return Result{}, fmt.Errorf("the build wrote no module: %w", err)
	}
	res.Size = fi.Size()
	return res, nil
}

// outOf returns the -o argument of c.
func outOf(c *exec.Cmd) string {
	for i, a := range c.Args {
		if a == "-o" && i+1 < len(c.Args) {
			return c.Args[i+1]
		}
	}
	return ""
}

// MakefileCheckout returns the checkout that a `groupstate init` project's Makefile in dir
// names (its line "GROUPSTATE_CHECKOUT ?= PATH"), or "".
func MakefileCheckout(dir string) string {
	f, err := os.Open(filepath.Join(dir, "Makefile"))
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "GROUPSTATE_CHECKOUT ?="); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
