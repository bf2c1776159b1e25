// Command groupstate runs and tests stateful stream handlers compiled to WebAssembly.
//
// See the README for the commands; every command has --help.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
)

// main runs the command line with a context that the first SIGINT or SIGTERM cancels.
func main() {
	// The first SIGINT or SIGTERM cancels ctx: serve stops its deployments (each one's batch
	// in flight finishes and commits first) and exits 0. A second one, while that drain
	// waits, exits at once with code 130 (TestServeSecondSignal).
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "groupstate: %v: stopping (a second signal exits at once)\n", sig)
		cancel()
		sig = <-sigs
		fmt.Fprintf(os.Stderr, "groupstate: second signal (%v): exiting at once, without a clean stop\n", sig)
		os.Exit(130)
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	signal.Stop(sigs)
	cancel()
	os.Exit(code)
}

// run runs the command line args (without the program's name) until it is done or ctx is
// cancelled, writing to stdout and stderr, and returns the process's exit code: 0 on success,
// the code of an exitError (with its message, if any, on stderr), else 1 with
// "groupstate: " and the error on stderr. Standard input is the process's.
//
// It is the whole command but for the process: tests call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand()
	if args == nil {
		args = []string{} // cobra takes nil to mean os.Args[1:]
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if usageError(err) && cmd != nil {
		// Wrong arguments or flags: say so, then how the command is used, in two lines.
		fmt.Fprintf(stderr, "groupstate: %s\nusage: %s\nrun '%s --help' for its flags and examples\n", userMessage(err), cmd.UseLine(), cmd.CommandPath())
		return 1
	}
	var ex *exitError
	if errors.As(err, &ex) {
		if ex.msg != "" {
			fmt.Fprintln(stderr, ex.msg)
		}
		return ex.code
	}
	fmt.Fprintln(stderr, "groupstate:", userMessage(err))
	return 1
}

// internalPrefix matches the package prefixes of groupstate's error texts ("client: ",
// "natsio: ", ...) at the start of the message or of a wrapped part of it: they name Go
// packages, which tell a user of the command nothing.
var internalPrefix = regexp.MustCompile(`(^|: )(service|client|natsio|engine|spec|state|registry|changelog|input|output|cluster|api|host|handler|history|replay|scenario|topology|placement|auth): `)

// userMessage is err's text for a user: without internal package prefixes, and with the Go
// type a spec decodes into named as what it is.
func userMessage(err error) string {
	msg := err.Error()
	for {
		next := internalPrefix.ReplaceAllString(msg, "$1")
		if next == msg {
			break
		}
		msg = next
	}
	return strings.ReplaceAll(msg, "type spec.Spec", "a deployment spec")
}

// usageError tells whether err is cobra's complaint about the command line itself (its
// arguments or flags), after which the usage helps; the commands' own errors say what to do.
func usageError(err error) bool {
	msg := err.Error()
	for _, s := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "arg(s), received", "accepts at most", "requires at least", "flag needs an argument", "required flag(s)", "invalid argument"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// exitError ends the command with a specific exit code and an optional message.
type exitError struct {
	code int
	msg  string
}

// Error returns the message.
func (e *exitError) Error() string { return e.msg }
