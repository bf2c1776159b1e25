package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/groupstate/groupstate/internal/testlong"
	"github.com/groupstate/groupstate/internal/toolchain"
)

// A guide's runnable steps: the shell commands of its code blocks and the files it asks to
// save, in the order they appear (see guideSteps).
type guideStep struct {
	file string   // a file to write (a code block after "Save as `FILE`:" or "`FILE`:")
	body string   // its contents
	cmds []string // or: the block's command lines (continuations joined)
}

// saveAs finds the file a paragraph asks to save the code block after it as: "Save as
// `F`:", "save as `F` (...):" or a paragraph ending in "`F`:" or starting with "`F`".
var saveAs = []*regexp.Regexp{
	regexp.MustCompile("(?i)save as `([^`]+)`.*:$"),
	regexp.MustCompile("`([^`]+)`:$"),
	regexp.MustCompile("^`([^`]+)`(?: \\(|:)"),
}

// guideSteps returns the runnable steps of markdown: with fenced true, the ```sh blocks at
// the top level (a block indented in a list, such as a prerequisite, is not a step) and the
// files its other top-level blocks are saved as; with fenced false, the code blocks indented
// four spaces (the README that init generates), all commands.
func guideSteps(markdown string, fenced bool) []guideStep {
	var steps []guideStep
	var para []string
	lines := strings.Split(markdown, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case !fenced && strings.HasPrefix(line, "    ") && (i == 0 || strings.TrimSpace(lines[i-1]) == ""):
			var cmds []string
			for ; i < len(lines) && strings.HasPrefix(lines[i], "    "); i++ {
				cmds = append(cmds, strings.TrimPrefix(lines[i], "    "))
			}
			i--
			steps = append(steps, guideStep{cmds: joinContinued(cmds)})
			para = nil
		case fenced && strings.HasPrefix(line, "```"):
			lang := strings.TrimPrefix(line, "```")
			var body []string
			for i++; i < len(lines) && lines[i] != "```"; i++ {
				body = append(body, lines[i])
			}
			if lang == "sh" {
				steps = append(steps, guideStep{cmds: joinContinued(body)})
			} else if name := savedAs(strings.Join(para, " ")); name != "" {
				steps = append(steps, guideStep{file: name, body: strings.Join(body, "\n") + "\n"})
			}
			para = nil
		case strings.TrimSpace(line) == "":
			// The paragraph just ended stays the one before the next block.
		default:
			if i > 0 && strings.TrimSpace(lines[i-1]) == "" {
				para = nil // a new paragraph
			}
			para = append(para, strings.TrimSpace(line))
		}
	}
	return steps
}

// fileName is what savedAs takes for a file name: a relative path with an extension.
var fileName = regexp.MustCompile(`^[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.[A-Za-z0-9]+$`)

// savedAs returns the file name paragraph asks to save the next block as, or "".
func savedAs(paragraph string) string {
	for _, re := range saveAs {
		if m := re.FindStringSubmatch(paragraph); m != nil && fileName.MatchString(m[1]) {
			return m[1]
		}
	}
	return ""
}

// joinContinued joins the lines ending in a backslash with the next, and drops empty lines.
func joinContinued(lines []string) []string {
	var out []string
	var cur strings.Builder
	for _, l := range lines {
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur.WriteString(s)
			continue
		}
		cur.WriteString(l)
		if strings.TrimSpace(cur.String()) != "" {
			out = append(out, cur.String())
		}
		cur.Reset()
	}
	return out
}

// guideScript makes one sh script of steps, run as written with these rewrites only, where a
// test must differ from a user's terminal: `groupstate serve` listens on port (NATS_URL names
// it to the other commands, as every client command reads it) and runs in the background,
// with the script going on once it answers (as a user waits for it to start); `groupstate
// tail` runs in the background (a second terminal), its output in logs/tailN.out, the script
// going on once it follows, and after a `groupstate pub` once the tail shows outputs (as a
// user watches the second terminal before going on). It returns the script, the number of
// tails and whether a pub came before any tail (following the guide would show nothing).
func guideScript(t *testing.T, steps []guideStep, port int) (script string, tails int, publishedBeforeTail bool) {
	t.Helper()
	var b strings.Builder
	b.WriteString(`set -ex
gs_wait() { what=$1; shift; n=0; until "$@" >/dev/null 2>&1; do n=$((n+1)); if [ $n -ge 900 ]; then echo "guide test: timed out waiting for $what" >&2; exit 1; fi; sleep 0.1; done; }
`)
	for _, s := range steps {
		if s.file != "" {
			fmt.Fprintf(&b, "cat > %s <<'GUIDE_FILE_END'\n%sGUIDE_FILE_END\n", s.file, s.body)
			continue
		}
		for _, c := range s.cmds {
			words, err := shellWords(c)
			if err != nil {
				t.Fatalf("guide line %q: %v", c, err)
			}
			if len(words) > 0 && words[len(words)-1] == "&" {
				words = words[:len(words)-1]
			}
			switch {
			case len(words) >= 2 && words[0] == "groupstate" && words[1] == "serve":
				fmt.Fprintf(&b, "%s --listen 127.0.0.1:%d >>\"$GS_LOGS/serve.log\" 2>&1 &\ngs_wait 'groupstate serve' groupstate list\n", quoteWords(words), port)
			case len(words) >= 2 && words[0] == "groupstate" && words[1] == "tail":
				tails++
				fmt.Fprintf(&b, "%s >\"$GS_LOGS/tail%d.out\" 2>\"$GS_LOGS/tail%d.err\" &\ngs_wait 'groupstate tail' grep -q 'following ' \"$GS_LOGS/tail%d.err\"\n", quoteWords(words), tails, tails, tails)
			default:
				if tails == 0 && strings.Contains(c, "groupstate pub") {
					publishedBeforeTail = true
				}
				b.WriteString(c + "\n")
				if tails > 0 && strings.Contains(c, "groupstate pub") {
					// As a user watches the second terminal: the outputs of the rows come.
					fmt.Fprintf(&b, "gs_wait 'outputs in the tail' test -s \"$GS_LOGS/tail%d.out\"\n", tails)
				}
			}
		}
	}
	return b.String(), tails, publishedBeforeTail
}

// quoteWords joins words quoted for sh.
func quoteWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// guideDir returns an empty folder to follow a guide in, next to "groupstate", a link to this
// checkout, as the guides assume ("../groupstate: the path to your checkout").
func guideDir(t *testing.T) string {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repoRoot, filepath.Join(work, "groupstate")); err != nil {
		t.Fatal(err)
	}
	return work
}

// runGuide runs the steps of a guide as one sh script in the folder work, with the groupstate
// binary on PATH, and checks that every line succeeded and that a tail shows the outputs of
// the rows published. It returns the script's output.
func runGuide(t *testing.T, name, work string, steps []guideStep) string {
	t.Helper()
	if len(steps) == 0 {
		t.Fatalf("%s: no runnable steps found; the parser lost them", name)
	}
	bin := groupstateBin(t)
	logs := t.TempDir()
	port := freePort(t)
	script, tails, early := guideScript(t, steps, port)
	if early {
		t.Errorf("%s publishes before any tail follows the outputs: following it shows nothing", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		fmt.Sprintf("NATS_URL=nats://127.0.0.1:%d", port), "GS_LOGS="+logs)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the background jobs too, to end them
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { endGroup(cmd.Process.Pid) })
	if err := cmd.Wait(); err != nil {
		serveLog, _ := os.ReadFile(filepath.Join(logs, "serve.log"))
		t.Fatalf("%s: a line failed (%v); the script ran as (sh -x):\n%s\nserve's log:\n%s", name, err, out.String(), serveLog)
	}
	for i := 1; i <= tails; i++ {
		f := filepath.Join(logs, fmt.Sprintf("tail%d.out", i))
		waitCLI(t, func() bool {
			b, _ := os.ReadFile(f)
			return bytes.Contains(b, []byte(`"total_logins"`))
		})
	}
	return out.String()
}

// endGroup stops the process group pgid (serve drains on SIGTERM) and waits for it to end.
func endGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// guideNeeds checks, for the guides and projects of each language, that its toolchain is
// installed, fully (compiler and linker, as groupstate build checks it), and else ends the
// test with toolchainMissing. Go's is the one running the tests; Python needs nothing more.
var guideNeeds = map[string]func(t *testing.T){
	"go":     func(*testing.T) {},
	"python": func(*testing.T) {},
	"c": func(t *testing.T) {
		if _, _, err := toolchain.Clang(); err != nil {
			toolchainMissing(t, "%v", err)
		}
	},
	"rust": func(t *testing.T) {
		if _, _, err := toolchain.Rustc(); err != nil {
			toolchainMissing(t, "%v", err)
		}
	},
	"assemblyscript": func(t *testing.T) {
		mustHaveExecPath(t, "node")
		mustHaveExecPath(t, "npm")
	},
}

// testGuides runs the handler guides docs/handlers/LANG.md of langs.
func testGuides(t *testing.T, langs ...string) {
	for _, lang := range langs {
		t.Run(lang, func(t *testing.T) {
			guideNeeds[lang](t)
			md, err := os.ReadFile(inRepo("docs/handlers/" + lang + ".md"))
			if err != nil {
				t.Fatal(err)
			}
			runGuide(t, lang+".md", guideDir(t), guideSteps(string(md), true))
		})
	}
}

// TestHandlerGuides runs the Go and Python handler guides' commands as written, in order,
// from an empty folder next to the checkout: the files they say to save, their build, test
// and deploy lines against a real runtime.
func TestHandlerGuides(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds modules and runs the guides against a real runtime")
	}
	testGuides(t, "go", "python")
}

// TestHandlerGuidesToolchains is TestHandlerGuides for the guides that need a toolchain other
// than Go's (C, Rust, AssemblyScript): a long test (a minute or more each), skipped when the
// toolchain is missing. .ci/run installs the toolchains and runs it.
func TestHandlerGuidesToolchains(t *testing.T) {
	testlong.Long(t)
	testGuides(t, "c", "rust", "assemblyscript")
}

// testInitReadmes runs, for each of langs, the commands of the README that groupstate init
// generates, as written, in the project it made: build, test, serve, deploy, tail, pub,
// status.
func testInitReadmes(t *testing.T, langs ...string) {
	for _, lang := range langs {
		t.Run(lang, func(t *testing.T) {
			name := "login-" + lang
			dir := filepath.Join(t.TempDir(), name)
			if _, stderr, code := runCLI(t, "init", name, "--lang", lang, "--dir", dir, "--sdk", repoRoot); code != 0 {
				t.Fatalf("init: exit %d: %s", code, stderr)
			}
			if lang != "python" { // Python needs no toolchain
				requireInitToolchain(t, dir) // what groupstate build needs for it, as build checks it
			}
			readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
			if err != nil {
				t.Fatal(err)
			}
			out := runGuide(t, name+"/README.md", dir, guideSteps(string(readme), false))
			if !regexp.MustCompile(`(?m)^built \S*` + regexp.QuoteMeta(name+".wasm") + ` \(\d+ KB\) in \d+\.\ds$`).MatchString(out) {
				t.Errorf("groupstate build's output lacks its closing line:\n%s", out)
			}
			if !strings.Contains(out, `"session_closed":true`) {
				t.Errorf("the scenario emitted no session_closed row:\n%s", out)
			}
		})
	}
}

// TestInitReadme runs the commands of the README that init generates for Go and Python.
func TestInitReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds modules and runs a README against a real runtime")
	}
	testInitReadmes(t, "go", "python")
}

// TestInitReadmeToolchains is TestInitReadme for the languages that need a toolchain other
// than Go's: a long test, skipped when the toolchain is missing (.ci/run runs it).
func TestInitReadmeToolchains(t *testing.T) {
	testlong.Long(t)
	testInitReadmes(t, "c", "rust", "assemblyscript")
}

// TestGuideSteps: the parser finds the files to save and the commands, and leaves out
// indented blocks and blocks nobody is asked to save.
func TestGuideSteps(t *testing.T) {
	md := "# x\n\n  ```sh\n  go build ./prereq\n  ```\n\nSave as `main.go`:\n\n```go\npackage main\n```\n\n" +
		"which gives:\n\n```\nmodule x\n```\n\n`src/lib.rs` (this is the sample):\n\n```rust\nfn f() {}\n```\n\n" +
		"A scenario. `a.jsonl`:\n\n```\n{}\n```\n\n```sh\nmkdir p && cd p\nrustc a \\\n    b   # c\n```\n"
	got := guideSteps(md, true)
	want := []guideStep{{file: "main.go", body: "package main\n"}, {file: "src/lib.rs", body: "fn f() {}\n"},
		{file: "a.jsonl", body: "{}\n"}, {cmds: []string{"mkdir p && cd p", "rustc a     b   # c"}}}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("guideSteps:\n got %q\nwant %q", got, want)
	}
}

// TestDocsNameRealFiles: every file the docs link to, and every repository path they name in
// backquotes (samples/..., sdk/..., docs/...), exists in the checkout, so that an example
// file a guide names can be opened.
func TestDocsNameRealFiles(t *testing.T) {
	docs, err := filepath.Glob(inRepo("docs/*.md"))
	if err != nil {
		t.Fatal(err)
	}
	handlers, _ := filepath.Glob(inRepo("docs/handlers/*.md"))
	docs = append(append(docs, handlers...), inRepo("README.md"), inRepo("abi/README.md"))
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	named := regexp.MustCompile("`((?:samples|sdk|docs|abi|runtime|cmd|mk|scripts|internal|state|timeouts)/[A-Za-z0-9_./-]+)`")
	goName := regexp.MustCompile(`\.[A-Z][A-Za-z0-9]*$`)
	n := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, doc)
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			if !fileIsThere(filepath.Join(filepath.Dir(doc), filepath.FromSlash(target))) {
				t.Errorf("%s links to %s, which does not exist", rel, m[1])
			}
		}
		for _, m := range named.FindAllStringSubmatch(string(b), -1) {
			if goName.MatchString(m[1]) || strings.Contains(m[1], "/target/") {
				continue // a Go name (package.Name), or what a build writes
			}
			n++
			if !fileIsThere(inRepo(strings.TrimSuffix(m[1], "/"))) {
				t.Errorf("%s names %s, which does not exist", rel, m[1])
			}
		}
	}
	if n < 50 {
		t.Errorf("found only %d links and paths in the docs; the patterns lost them", n)
	}
}
