package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
)

// TestServeDataDirLocked: a second serve on a data directory in use fails at once, naming
// the directory and the holder's PID, and leaves the first one running.
func TestServeDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	url := startServe(t, dir)
	_, errOut, code := runCLI(t, "serve", "--data", dir, "--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	want := fmt.Sprintf("--data %s is in use by the groupstate serve with PID %d", dir, os.Getpid())
	if code == 0 || !strings.Contains(errOut, want) {
		t.Fatalf("a second serve on the data directory: exit %d\n%s\nwant %q", code, errOut, want)
	}
	if out, _, code := runCLI(t, "list", "--server", url); code != 0 || !strings.Contains(out, "\nRUNTIME ") {
		t.Fatalf("the first serve after the second one's attempt: exit %d\n%s", code, out)
	}
}

// TestServeBusyPort: a --listen port in use fails at once with one line naming it and
// --listen, before the embedded server logs anything.
func TestServeBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	_, errOut, code := runCLI(t, "serve", "--data", t.TempDir(), "--listen", addr)
	if code == 0 || !strings.Contains(errOut, "--listen "+addr+": cannot listen there") || strings.Contains(errOut, "nats-server") {
		t.Fatalf("serve on a busy port: exit %d\n%s", code, errOut)
	}
}
