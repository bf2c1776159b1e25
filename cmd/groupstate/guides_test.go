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

// savedAs returns the file name paragraph asks to save the next block as, or "".
func savedAs(paragraph string) string {
	for _, re := range saveAs {
		if m := re.FindStringSubmatch(paragraph); m != nil && !strings.ContainsAny(m[1], " <>*") {
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
// going on once it follows. It returns the script and the number of tails.
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

// runGuide runs the steps of a guide as one sh script in work (a directory holding
// "groupstate", a link to this checkout, as the guides assume: "../groupstate, the path to
// your checkout"), with the groupstate binary on PATH, and checks that every line succeeded
// and that a tail shows the outputs of the rows published. It returns the script's output.
func runGuide(t *testing.T, name string, steps []guideStep) string {
	t.Helper()
	if len(steps) == 0 {
		t.Fatalf("%s: no runnable steps found; the parser lost them", name)
	}
	bin := groupstateBin(t)
	tmp := t.TempDir()
	work, logs := filepath.Join(tmp, "work"), filepath.Join(tmp, "logs")
	for _, d := range []string{work, logs} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(repoRoot, filepath.Join(work, "groupstate")); err != nil {
		t.Fatal(err)
	}
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
	err := cmd.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { endGroup(cmd.Process.Pid) })
	err = cmd.Wait()
	serveLog, _ := os.ReadFile(filepath.Join(logs, "serve.log"))
	if err != nil {
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

// TestHandlerGuides runs every handler guide's commands as written, in order, from an empty
// folder next to the checkout: the files it says to save, its build, test and deploy lines
// against a real runtime. A guide whose toolchain is missing (checked fully, as groupstate
// build checks it) is skipped; Go and Python need nothing beyond Go.
func TestHandlerGuides(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds modules and runs the guides against a real runtime")
	}
	for _, g := range []struct {
		name  string
		needs func(t *testing.T)
	}{
		{"go", func(*testing.T) {}},
		{"python", func(*testing.T) {}},
		{"c", func(t *testing.T) {
			if _, _, err := toolchain.Clang(); err != nil {
				toolchainMissing(t, "%v", err)
			}
		}},
		{"rust", func(t *testing.T) {
			if _, _, err := toolchain.Rustc(); err != nil {
				toolchainMissing(t, "%v", err)
			}
		}},
		{"assemblyscript", func(t *testing.T) {
			mustHaveExecPath(t, "node")
			mustHaveExecPath(t, "npm")
		}},
	} {
		t.Run(g.name, func(t *testing.T) {
			g.needs(t)
			md, err := os.ReadFile(inRepo("docs/handlers/" + g.name + ".md"))
			if err != nil {
				t.Fatal(err)
			}
			runGuide(t, g.name+".md", guideSteps(string(md), true))
		})
	}
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
