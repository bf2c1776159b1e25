package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeAuth: serve --auth FILE runs the embedded server with the file's users; a user
// of each role can do what its role allows and is refused the rest with a message that
// names the user and the operation; an anonymous client is refused; and without --auth,
// serve refuses an address other machines can reach, and the runtime's credentials flags.
func TestServeAuth(t *testing.T) {
	if _, errOut, code := runCLI(t, "serve", "--data", t.TempDir(), "--listen", "0.0.0.0:0"); code == 0 || !strings.Contains(errOut, "reachable from other machines") || !strings.Contains(errOut, "--insecure") {
		t.Fatalf("serve on 0.0.0.0 without --auth: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--user", "admin", "--password", "a-Secret-1"); code == 0 || !strings.Contains(errOut, "do not protect the embedded server") {
		t.Fatalf("serve with --user on the embedded server: exit %d\n%s", code, errOut)
	}
	users := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(users, []byte(`users:
  - {user: admin, password: a-Secret-1, role: admin}
  - {user: ops, password: o-Secret-2, role: reader}
  - {user: loader, password: l-Secret-3, role: producer, subjects: ["logins.>"]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("users:\n  - {user: x, password: short, role: root}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--auth", bad); code == 0 || !strings.Contains(errOut, "at least 8 characters") || !strings.Contains(errOut, `unknown role "root"`) {
		t.Fatalf("serve with a bad users file: exit %d\n%s", code, errOut)
	}

	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	var serveOut, serveLog syncBuffer
	exited := make(chan int, 1)
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dataDir, 0o755); err != nil { // as an older version, or a careless operator, left it
		t.Fatal(err)
	}
	go func() {
		exited <- run(ctx, []string{"serve", "--data", dataDir, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--auth", users}, &serveOut, &serveLog)
	}()
	defer func() { cancel(); <-exited }()
	as := func(user, password string, args ...string) (string, string, int) {
		return runCLI(t, append(args, "--server", url, "--user", user, "--password", password)...)
	}
	deadline := time.Now().Add(waitTimeout)
	for {
		if out, _, code := as("admin", "a-Secret-1", "list"); code == 0 && strings.Contains(out, "\nRUNTIME ") {
			break
		}
		select {
		case code := <-exited:
			exited <- code
			t.Fatalf("serve exited %d:\n%s", code, serveLog.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not come up:\n%s", serveLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(serveLog.String(), "a-Secret-1") {
		t.Fatalf("serve logged a password:\n%s", serveLog.String())
	}

	if _, errOut, code := runCLI(t, "list", "--server", url); code == 0 || !strings.Contains(errOut, "refused the connection's credentials") {
		t.Fatalf("anonymous list: exit %d\n%s", code, errOut)
	}
	logincount := inRepo("samples/logincount/logincount.yaml")
	if _, errOut, code := as("ops", "o-Secret-2", "deploy", "-f", logincount); code == 0 || !strings.Contains(errOut, "permission denied: user ops may not deploy logincount") {
		t.Fatalf("deploy as a reader: exit %d\n%s", code, errOut)
	}
	if out, errOut, code := as("admin", "a-Secret-1", "deploy", "-f", logincount); code != 0 {
		t.Fatalf("deploy as admin: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, code := as("ops", "o-Secret-2", "list"); code != 0 || !strings.Contains(out, "logincount") {
		t.Fatalf("list as a reader: exit %d\n%s", code, out)
	}
	rows := filepath.Join(t.TempDir(), "rows.jsonl")
	if err := os.WriteFile(rows, []byte("{\"user_id\":\"ada\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := as("ops", "o-Secret-2", "pub", "logins.web", "--file", rows); code == 0 || !strings.Contains(errOut, "permission denied: user ops may not publish rows to logins.web") {
		t.Fatalf("pub as a reader: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := as("loader", "l-Secret-3", "tail", "logincount.out"); code == 0 || !strings.Contains(errOut, "permission denied: user loader may not read logincount.out") {
		t.Fatalf("tail as a producer: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := as("loader", "l-Secret-3", "pub", "logins.web", "--file", rows); code != 0 || !strings.Contains(errOut, "published 1 message to logins.web") {
		t.Fatalf("pub as a producer: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := as("ops", "o-Secret-2", "undeploy", "logincount"); code == 0 || !strings.Contains(errOut, "permission denied: user ops may not undeploy logincount") {
		t.Fatalf("undeploy as a reader: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := as("loader", "l-Secret-3", "status", "logincount"); code == 0 || !strings.Contains(errOut, "permission denied: user loader may not read the deployments") {
		t.Fatalf("status as a producer: exit %d\n%s", code, errOut)
	}
	if out, errOut, code := as("admin", "a-Secret-1", "undeploy", "logincount"); code != 0 {
		t.Fatalf("undeploy as admin: exit %d\n%s%s", code, out, errOut)
	}

	// The data directory and everything serve wrote under it are its user's alone.
	files := 0
	err := filepath.WalkDir(dataDir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %04o: readable by other accounts", path, fi.Mode().Perm())
		}
		if !d.IsDir() {
			files++
		}
		return nil
	})
	if err != nil || files < 5 {
		t.Fatalf("walking the data directory: %d files, %v", files, err)
	}
}

func TestAuthPermissionsCommand(t *testing.T) {
	out, errOut, code := runCLI(t, "auth", "permissions", "--role", "producer", "--subjects", "logins.>")
	if code != 0 || !strings.Contains(out, `publish: { allow: ["$JS.API.INFO", "logins.>", "$SYS.REQ.USER.INFO"] }`) || !strings.Contains(out, `subscribe: { allow: ["_INBOX.>"] }`) {
		t.Fatalf("auth permissions: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, code := runCLI(t, "auth", "permissions", "--role", "reader", "--json"); code != 0 || !strings.Contains(out, `"groupstate.api.state.>"`) {
		t.Fatalf("auth permissions --json: exit %d\n%s", code, out)
	}
	if _, errOut, code := runCLI(t, "auth", "permissions", "--role", "root"); code == 0 || !strings.Contains(errOut, `unknown role "root"`) {
		t.Fatalf("an unknown role: exit %d\n%s", code, errOut)
	}
}
