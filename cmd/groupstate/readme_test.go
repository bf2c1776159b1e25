package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeCommand is one command line of a README code block, split into words as a shell
// would (single and double quotes; no variables, pipes or globs: the README uses none).
type readmeCommand struct {
	line string
	args []string
}

// readmeCommands returns the command lines of the code blocks (lines indented four spaces)
// of the section of markdown headed heading, up to the next heading of its level, with their
// trailing comments removed.
func readmeCommands(t *testing.T, markdown, heading string) []readmeCommand {
	t.Helper()
	_, section, ok := strings.Cut(markdown, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README has no section %q", heading)
	}
	level := heading[:strings.Index(heading, " ")+1]
	if i := strings.Index(section, "\n"+level); i >= 0 {
		section = section[:i]
	}
	var cmds []readmeCommand
	for _, line := range strings.Split(section, "\n") {
		code, ok := strings.CutPrefix(line, "    ")
		if !ok || strings.TrimSpace(code) == "" || strings.HasPrefix(code, " ") {
			continue
		}
		args, err := shellWords(code)
		if err != nil {
			t.Fatalf("README line %q: %v", code, err)
		}
		cmds = append(cmds, readmeCommand{line: strings.TrimSpace(code), args: args})
	}
	return cmds
}

// shellWords splits line into words as sh would, dropping a trailing # comment.
func shellWords(line string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'' || c == '"':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unterminated %c", c)
			}
			word.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '#' && !inWord:
			i = len(line)
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}

// TestReadmeRunIt runs the README's "Run it" section as written, line by line, against a real
// serve: the build, serve with its embedded NATS, deploy, the tails of a second terminal, pub,
// every "look inside" command, undeploy. Each line must succeed and the tail must show the
// outputs of the rows published, so that a README line that fails, or an order that shows
// nothing, fails here.
//
// The only rewrites are where this test must differ from a user's machine: the binary and the
// data directory go to a temporary directory, serve listens on a free port (NATS_URL names it
// to the other commands, as the README says they read it), the groupstate commands run
// in-process (the same code as the binary's), and a nats CLI line runs only when nats is on
// PATH (the README says "if you have the nats CLI").
func TestReadmeRunIt(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the README against a real runtime")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds := readmeCommands(t, string(readme), "## Run it")
	if len(cmds) < 10 {
		t.Fatalf("found %d command lines in README's Run it; the parser lost them", len(cmds))
	}
	tmp := t.TempDir()
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	t.Setenv("NATS_URL", url)
	t.Chdir("../..") // the README's commands run from the checkout's root

	ctx, cancel := context.WithCancel(context.Background())
	type background struct {
		line        string
		out, errOut *syncBuffer
		exited      chan int
	}
	var bg []background
	t.Cleanup(func() {
		cancel()
		for _, b := range bg {
			<-b.exited
		}
	})
	start := func(c readmeCommand, args []string) background {
		b := background{line: c.line, out: &syncBuffer{}, errOut: &syncBuffer{}, exited: make(chan int, 1)}
		go func() { b.exited <- run(ctx, args, b.out, b.errOut) }()
		bg = append(bg, b)
		return b
	}
	var tails []background
	published := false
	for _, c := range cmds {
		args := c.args
		if len(args) > 2 && args[0] == "go" && args[1] == "run" && args[2] == "./cmd/groupstate" {
			args = append([]string{"./groupstate"}, args[3:]...) // the same command, in-process
		}
		switch {
		case args[0] == "go" && args[1] == "build":
			args = append([]string(nil), args...)
			for i := range args {
				if args[i] == "-o" {
					args[i+1] = filepath.Join(tmp, "groupstate")
				}
			}
			out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
			if err != nil {
				t.Fatalf("README line %q: %v\n%s", c.line, err, out)
			}
			continue
		case args[0] == "nats":
			if _, err := exec.LookPath("nats"); err != nil {
				t.Logf("README line %q: skipped, no nats CLI on PATH (the README makes it optional)", c.line)
				continue
			}
			out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
			if err != nil {
				t.Fatalf("README line %q: %v\n%s", c.line, err, out)
			}
			continue
		case args[0] != "./groupstate":
			t.Fatalf("README line %q: this test does not know how to run it; teach it, or keep the README to commands it runs", c.line)
		}
		args = args[1:]
		switch args[0] {
		case "serve":
			for i := range args {
				if args[i] == "./gsdata" {
					args[i] = sharedCache(t, filepath.Join(tmp, "gsdata"))
				}
			}
			args = append(args, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
			s := start(c, args)
			waitCLI(t, func() bool {
				select {
				case code := <-s.exited:
					s.exited <- code
					t.Fatalf("README line %q exited %d", c.line, code)
				default:
				}
				_, _, code := runCLI(t, "list")
				return code == 0
			})
		case "tail":
			b := start(c, args)
			tails = append(tails, b)
			waitCLI(t, func() bool { // tail is subscribed once it says what it follows
				select {
				case code := <-b.exited:
					b.exited <- code
					t.Fatalf("README line %q exited %d: %s", c.line, code, b.errOut.String())
				default:
				}
				return strings.Contains(b.errOut.String(), "following ")
			})
		default:
			out, errOut, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("README line %q exited %d\nstdout: %s\nstderr: %s", c.line, code, out, errOut)
			}
			if args[0] == "pub" {
				if len(tails) == 0 {
					t.Fatalf("README line %q publishes before any tail follows the outputs: following the README shows nothing", c.line)
				}
				published = true
				// The tail of the second terminal shows the outputs of what was published.
				waitCLI(t, func() bool { return strings.Contains(tails[0].out.String(), `"user_id"`) })
			}
		}
	}
	if !published || len(tails) == 0 {
		t.Fatalf("README's Run it has no pub after a tail (published %v, tails %d): it would show nothing", published, len(tails))
	}
}

// TestShellWords: the README's quoting is split as sh splits it.
func TestShellWords(t *testing.T) {
	tests := []struct {
		line string
		want []string
	}{
		{`./groupstate state logincount ada    # ada's state`, []string{"./groupstate", "state", "logincount", "ada"}},
		{`nats pub logins.web '{"user_id": "ada"}'                # if you have`, []string{"nats", "pub", "logins.web", `{"user_id": "ada"}`}},
		{`echo "a b"c`, []string{"echo", "a bc"}},
		{`x#y`, []string{"x#y"}},
	}
	for _, tt := range tests {
		got, err := shellWords(tt.line)
		if err != nil || strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("shellWords(%q) = %q, %v; want %q", tt.line, got, err, tt.want)
		}
	}
	if _, err := shellWords(`echo 'open`); err == nil {
		t.Error("an unterminated quote was accepted")
	}
}

// TestReadmeOutputsIgnored: what following README's "Run it" writes into the checkout (the
// binary of `go build -o`, the data directory of `serve --data`) is ignored by git, so that a
// checkout that followed it is not dirty (`groupstate version` would say +dirty).
func TestReadmeOutputsIgnored(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var written []string // a file, or a directory's file
	for _, c := range readmeCommands(t, string(readme), "## Run it") {
		for i := 0; i+1 < len(c.args); i++ {
			switch c.args[i] {
			case "-o":
				written = append(written, c.args[i+1])
			case "--data":
				written = append(written, filepath.Join(c.args[i+1], "runtime", "state"))
			}
		}
	}
	if len(written) < 2 {
		t.Fatalf("found %q written by README's Run it; want the binary and the data directory", written)
	}
	for _, w := range written {
		// --no-index: whether git would ignore it, created or not.
		cmd := exec.Command("git", "check-ignore", "-q", "--no-index", w)
		cmd.Dir = repoRoot
		if err := cmd.Run(); err != nil {
			t.Errorf("%s, which README's Run it writes, is not ignored by git (.gitignore): %v", w, err)
		}
	}
}
