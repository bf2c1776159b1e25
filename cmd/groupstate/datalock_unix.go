//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDataDir takes the data directory for this serve: an exclusive lock on DIR/serve.lock,
// held until release, with this process's PID written in it. A second serve on the directory
// fails at once naming the holder, before anything opens the state or the embedded server's
// storage (a second NATS server on a live JetStream store shuts it down).
func lockDataDir(dir string) (release func(), err error) {
	path := filepath.Join(dir, "serve.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--data %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil && strings.TrimSpace(string(b)) != "" {
			holder = "the groupstate serve with PID " + strings.TrimSpace(string(b))
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("--data %s is in use by %s: stop it, or give another data directory", dir, holder)
		}
		return nil, fmt.Errorf("--data %s: locking %s: %w", dir, path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil // closing releases the lock
}
