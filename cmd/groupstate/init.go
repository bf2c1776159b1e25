package main

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/spf13/cobra"
)

// templates holds the project skeletons of `groupstate init`: templates/common for every
// language (spec, scenario, README, .gitignore) and templates/<lang> for each language. In
// file names, NAME stands for the project's name, a leading "gitignore" for ".gitignore", and a
// ".tmpl" suffix marks a text/template (other files are copied as they are).
//
//go:embed templates
var templates embed.FS

// sdkModule is the module path of the groupstate repository, whose checkout holds every SDK.
const sdkModule = "github.com/groupstate/groupstate"

// initLangs are the languages of `groupstate init`, with what the README calls them and how
// `groupstate build` builds their module (package toolchain).
var initLangs = map[string]struct{ title, build string }{
	"go":             {"Go", "`GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared`, the standard Go toolchain, no TinyGo"},
	"rust":           {"Rust", "plain `rustc --target wasm32-wasip1` (or wasm32-wasi), no cargo and no crates"},
	"c":              {"C", "`clang --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor`"},
	"assemblyscript": {"AssemblyScript", "the checkout's pinned `asc --runtime minimal --exportStart _initialize`, which needs Node.js"},
	"python":         {"Python", "no toolchain: the groupstate binary puts the .py files into the CPython runtime module it carries"},
}

// initFileAbout says what each generated file is, for the README and the command's output.
var initFileAbout = map[string]string{
	"main.go":    "the handler",
	"go.mod":     "the Go module; requires the SDK " + sdkModule + "/sdk/go",
	"src/lib.rs": "the handler",
	"Makefile":   "optional: `make` runs `groupstate build`; `make test` runs the scenario",
	"README.md":  "this file",
	".gitignore": "ignores the built module",
	"NAME.yaml":  "the deployment spec: input `NAME.in`, key `user_id`, processing-time timeouts, output `NAME.out`, `config.idle_timeout: 10s`",
	"NAME.jsonl": "a scenario for `groupstate test`, with the rows each batch must emit",
	"NAME.c":     "the handler",
	"NAME.ts":    "the handler",
	"NAME.py":    "the handler",
}

var initNameRE = regexp.MustCompile(`^[a-z0-9-]+$`)

// initFile is one generated file.
type initFile struct {
	Path  string // relative to the project directory, slash-separated
	About string
	data  []byte
}

// initData is what the templates see.
type initData struct {
	Name      string
	Ident     string // Name as an identifier (Rust crate name)
	Lang      string
	LangTitle string
	BuildNote string
	Checkout  string // absolute path of the groupstate checkout; "" when none was found
	GoReplace string // Checkout, quoted for go.mod when needed
	GoVersion string // the go line of the generated go.mod
	ASImport  string // the checkout's sdk/assemblyscript/assembly, relative to the project
	// Processor: the handler is a StatefulProcessor (ABI v2) instead of a function (--processor,
	// Python only); its files in templates/python-processor replace those of templates/python.
	Processor bool
	Class     string // Name as a Python class name (the processor)
	Files     []initFile
}

// newInitCommand returns `groupstate init`, which creates a handler project.
func newInitCommand() *cobra.Command {
	var lang, dir, sdk string
	var processor bool
	cmd := &cobra.Command{
		Use:   "init NAME [--lang go|rust|c|assemblyscript|python] [--processor] [--dir DIR] [--sdk CHECKOUT]",
		Short: "Create a handler project (handler, spec, scenario) that groupstate build builds and that passes its test",
		Long: `Creates a handler project in DIR (default ./NAME): a handler implementing the logincount
example (count logins per user_id, emit {"user_id", "total_logins"}, close the session with a
"session_closed" row after config.idle_timeout), the spec NAME.yaml (input NAME.in, output
NAME.out), the scenario NAME.jsonl, a README with the next steps and a Makefile (optional: it
runs groupstate build). As generated, "groupstate build" builds NAME.wasm and
"groupstate test --spec NAME.yaml --scenario NAME.jsonl" passes.

With --lang python --processor the handler is the same logic as a StatefulProcessor of Spark
4's transformWithState (value state and processing-time timers; an ABI v2 module) instead of
an applyInPandasWithState function; the spec and the scenario are the same.

NAME is the deployment's name: [a-z0-9-]+, at most 63 characters. DIR must not exist or be
empty.

The SDKs are not published as packages: the project uses the SDK of a groupstate checkout, by
absolute path (Go: a replace in go.mod; Rust, C and AssemblyScript: the Makefile's
GROUPSTATE_CHECKOUT line, which groupstate build reads, and for AssemblyScript the import
paths). The checkout is --sdk, else the first directory at or above
the current directory (then above this executable) whose go.mod is module ` + sdkModule + `.
Without one, the project is still created, and its README says what to set.`,
		Example: `  groupstate init logins
  groupstate init logins --lang rust --dir ~/src/logins
  groupstate init logins --lang assemblyscript --sdk ~/src/groupstate
  groupstate init logins --lang python --processor
  cd logins && groupstate build && groupstate test --spec logins.yaml --scenario logins.jsonl`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("init takes one argument, the project's name (got %d); example: groupstate init logins --lang go", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInit(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], lang, dir, sdk, processor)
		},
	}
	cmd.Flags().StringVar(&lang, "lang", "go", "handler language: go, rust, c, assemblyscript or python")
	cmd.Flags().BoolVar(&processor, "processor", false, "with --lang python: a StatefulProcessor (transformWithState, ABI v2) instead of a function")
	cmd.Flags().StringVar(&dir, "dir", "", "project directory (default ./NAME); must not exist or be empty")
	cmd.Flags().StringVar(&sdk, "sdk", "", "groupstate checkout whose SDK the project uses (default: found from the current directory)")
	return cmd
}

// runInit creates the project name in lang under dir with the SDK of the checkout sdk (or the one
// found), a StatefulProcessor when processor (Python only), and prints what it made and the
// next steps to stdout and its warnings to stderr.
func runInit(stdout, stderr io.Writer, name, lang, dir, sdk string, processor bool) error {
	if !initNameRE.MatchString(name) || len(name) > 63 {
		return fmt.Errorf("invalid name %q: a name is 1 to 63 characters of [a-z0-9-] (lower-case letters, digits, '-'), e.g. logins or login-count", name)
	}
	lang = strings.ToLower(lang)
	if lang == "as" || lang == "ts" {
		lang = "assemblyscript"
	}
	l, ok := initLangs[lang]
	if !ok {
		return fmt.Errorf("unknown --lang %q: use go, rust, c, assemblyscript or python", lang)
	}
	if processor && lang != "python" {
		return fmt.Errorf("--processor is for --lang python (a PySpark StatefulProcessor); the %s SDK's processors are in docs/handlers/%s.md", l.title, lang)
	}
	if dir == "" {
		dir = name
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := checkEmptyDir(dir); err != nil {
		return err
	}

	checkout, how, err := findCheckout(sdk)
	if err != nil {
		return err
	}
	if lang == "python" {
		checkout = "" // a Python project needs no checkout: its SDK is in the groupstate binary
	}
	d := initData{
		Name:      name,
		Ident:     strings.ReplaceAll(name, "-", "_"),
		Lang:      lang,
		LangTitle: l.title,
		BuildNote: l.build,
		Checkout:  checkout,
		GoVersion: "1.26.0",
		Processor: processor,
		Class:     processorClass(name),
	}
	var warnings []string
	if checkout != "" {
		d.GoReplace = checkout
		if strings.ContainsAny(checkout, " \t\"'`\\") {
			d.GoReplace = strconv.Quote(checkout)
		}
		if v := goModGoVersion(filepath.Join(checkout, "go.mod")); v != "" {
			d.GoVersion = v
		}
		rel, err := filepath.Rel(absDir, filepath.Join(checkout, "sdk", "assemblyscript", "assembly"))
		if err != nil {
			rel = filepath.Join(checkout, "sdk", "assemblyscript", "assembly")
		}
		d.ASImport = filepath.ToSlash(rel)
		if !strings.HasPrefix(d.ASImport, ".") {
			d.ASImport = "./" + d.ASImport
		}
		if need := map[string]string{
			"rust":           "sdk/rust/src/lib.rs",
			"c":              "sdk/c/groupstate.h",
			"assemblyscript": "sdk/assemblyscript/assembly/index.ts",
			"go":             "sdk/go/doc.go",
		}[lang]; need != "" {
			if _, err := os.Stat(filepath.Join(checkout, filepath.FromSlash(need))); err != nil {
				warnings = append(warnings, fmt.Sprintf("the checkout %s has no %s: is it a groupstate checkout?", checkout, need))
			}
		}
		if lang == "assemblyscript" {
			if _, err := os.Stat(filepath.Join(checkout, "sdk", "assemblyscript", "node_modules", ".bin", "asc")); err != nil {
				warnings = append(warnings, fmt.Sprintf("the AssemblyScript compiler is not installed: it needs Node.js; run 'npm ci' in %s before groupstate build",
					filepath.Join(checkout, "sdk", "assemblyscript")))
			}
		}
	} else {
		d.ASImport = "../groupstate/sdk/assemblyscript/assembly" // a guess; the README says to fix it
	}

	files, err := renderInit(d)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return err
		}
	}

	shown := dir
	if cwd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(cwd, absDir); err == nil && !strings.HasPrefix(r, "..") {
			shown = r
		} else {
			shown = absDir
		}
	}
	fmt.Fprintf(stdout, "Created %s handler project %s in %s:\n", l.title, name, shown)
	width := 0
	for _, f := range files {
		width = max(width, len(f.Path))
	}
	for _, f := range files {
		fmt.Fprintf(stdout, "  %-*s  %s\n", width, f.Path, strings.ReplaceAll(f.About, "`", ""))
	}
	if lang == "python" {
		fmt.Fprintf(stdout, "\nSDK: the groupstate package and the Python runtime come with the groupstate binary; no checkout is needed\n")
	} else if checkout != "" {
		fmt.Fprintf(stdout, "\nSDK: the groupstate checkout %s (%s)\n", checkout, how)
	} else {
		fmt.Fprintf(stdout, "\nSDK: no groupstate checkout found; see README.md before you build\n")
		fmt.Fprintf(stderr, "\nwarning: no groupstate checkout found (no --sdk, and no go.mod of module %s at or above %s).\n"+
			"The SDK is not published, so the project cannot build until you point it at a checkout: see %s.\n"+
			"Or run again with --sdk /path/to/groupstate.\n",
			sdkModule, cwdOrDot(), filepath.Join(shown, "README.md"))
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	fmt.Fprintf(stdout, "\nNext:\n")
	if shown != "." {
		fmt.Fprintf(stdout, "  cd %s\n", shellQuote(shown))
	}
	fmt.Fprintf(stdout, "  groupstate build                      # builds %s.wasm\n", name)
	fmt.Fprintf(stdout, "  groupstate test --spec %s.yaml --scenario %s.jsonl\n", name, name)
	fmt.Fprintf(stdout, "  groupstate serve --data ./gsdata      # in another terminal\n")
	fmt.Fprintf(stdout, "  groupstate deploy -f %s.yaml\n", name)
	return nil
}

// checkEmptyDir refuses a dir that exists and is not an empty directory.
func checkEmptyDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a directory: choose another --dir", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("directory %s already exists and is not empty (it has %s): choose another --dir or another name; init never overwrites files", dir, entries[0].Name())
	}
	return nil
}

// findCheckout returns the absolute root of the groupstate checkout to take the SDKs from:
// sdk when set (it must be one), else the first directory at or above the current directory,
// then at or above the executable's, whose go.mod declares module github.com/groupstate/groupstate.
// It returns "" when there is none, and how it was found.
func findCheckout(sdk string) (root, how string, err error) {
	if sdk != "" {
		abs, err := filepath.Abs(sdk)
		if err != nil {
			return "", "", err
		}
		if !isCheckout(abs) {
			return "", "", fmt.Errorf("--sdk %s is not a groupstate checkout: it has no go.mod declaring module %s", sdk, sdkModule)
		}
		return abs, "--sdk", nil
	}
	if cwd, err := os.Getwd(); err == nil {
		if r := walkUpToCheckout(cwd); r != "" {
			return r, "found from the current directory", nil
		}
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			if r := walkUpToCheckout(filepath.Dir(exe)); r != "" {
				return r, "found from the groupstate executable's directory", nil
			}
		}
	}
	return "", "", nil
}

// walkUpToCheckout returns the first directory at or above dir that is a groupstate checkout,
// or "".
func walkUpToCheckout(dir string) string {
	for {
		if isCheckout(dir) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// isCheckout reports whether dir/go.mod declares module github.com/groupstate/groupstate.
func isCheckout(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == sdkModule
		}
	}
	return false
}

// goModGoVersion returns the version of the go directive of the go.mod at p, or "".
func goModGoVersion(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 2 && fields[0] == "go" {
			return fields[1]
		}
	}
	return ""
}

// renderInit renders templates/common and templates/<lang> for d, sorted by path.
func renderInit(d initData) ([]initFile, error) {
	type src struct{ embedPath, out string }
	var srcs []src
	roots := []string{"templates/common", "templates/" + d.Lang}
	if d.Processor {
		roots = append(roots, "templates/"+d.Lang+"-processor")
	}
	for _, root := range roots {
		err := fs.WalkDir(templates, root, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			rel := strings.TrimPrefix(p, root+"/")
			out := strings.TrimSuffix(rel, ".tmpl")
			base := path.Base(out)
			if base == "gitignore" {
				base = ".gitignore"
			}
			base = strings.ReplaceAll(base, "NAME", d.Name)
			out = path.Join(path.Dir(out), base)
			srcs = slices.DeleteFunc(srcs, func(s src) bool { return s.out == out }) // a later root's file replaces an earlier one's
			srcs = append(srcs, src{p, out})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(srcs, func(i, j int) bool { return srcs[i].out < srcs[j].out })
	files := make([]initFile, len(srcs))
	for i, s := range srcs {
		key := s.out
		if strings.HasPrefix(path.Base(key), d.Name+".") {
			key = path.Join(path.Dir(key), "NAME"+strings.TrimPrefix(path.Base(key), d.Name))
		}
		about := strings.ReplaceAll(initFileAbout[key], "NAME", d.Name)
		if s.out == "README.md" {
			about = "next steps"
		}
		files[i] = initFile{Path: s.out, About: about}
	}
	// The README lists the files, so every template sees the list.
	d.Files = make([]initFile, len(files))
	copy(d.Files, files)
	for i := range d.Files {
		if d.Files[i].Path == "README.md" {
			d.Files[i].About = "this file"
		}
	}
	d.Files = append(d.Files, initFile{Path: d.Name + ".wasm", About: "the module, built by `groupstate build` (not generated)"})
	for i, s := range srcs {
		raw, err := templates.ReadFile(s.embedPath)
		if err != nil {
			return nil, err
		}
		if !strings.HasSuffix(s.embedPath, ".tmpl") {
			files[i].data = raw
			continue
		}
		t, err := template.New(s.embedPath).Option("missingkey=error").Parse(string(raw))
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", s.embedPath, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, d); err != nil {
			return nil, fmt.Errorf("template %s: %w", s.embedPath, err)
		}
		files[i].data = b.Bytes()
	}
	return files, nil
}

// cwdOrDot is the current directory, or "." when it cannot be had.
func cwdOrDot() string {
	if cwd, err := os.Getwd(); err == nil {
		return cwd
	}
	return "."
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./~+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// processorClass returns name ([a-z0-9-]+) as the CamelCase name of a Python processor
// class: "login-count" is "LoginCountProcessor", "my-processor" "MyProcessor"; a name that
// starts with a digit gets a leading "P".
func processorClass(name string) string {
	var b strings.Builder
	for _, part := range strings.Split(name, "-") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	c := b.String()
	if c == "" || c[0] >= '0' && c[0] <= '9' {
		c = "P" + c
	}
	if !strings.HasSuffix(c, "Processor") {
		c += "Processor"
	}
	return c
}
