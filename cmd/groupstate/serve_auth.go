package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"

	"github.com/groupstate/groupstate/runtime/auth"
	"github.com/groupstate/groupstate/runtime/service"
)

// embeddedAuth sets the embedded server's users from the users file (none: no
// authentication, which only a loopback address or --insecure allows) and points the
// runtime's own connection, cf, at its user with a password made for this process.
func embeddedAuth(eo *service.EmbeddedOptions, cf *connFlags, authFile string, insecure bool) error {
	if cf.opts.User != "" || cf.opts.Password != "" || cf.opts.CredsFile != "" || cf.opts.NKeyFile != "" {
		return fmt.Errorf("--user, --password, --creds and --nkey are the runtime's credentials on an external server (--server); they do not protect the embedded server: give --auth FILE for that")
	}
	if authFile == "" {
		if !loopback(eo.Host) && !insecure {
			return fmt.Errorf("--listen %s is reachable from other machines, and without --auth anyone who reaches it may deploy code, read any state and delete anything: give --auth FILE (users with roles, see docs/security.md), or --insecure to accept that", net.JoinHostPort(eo.Host, fmt.Sprint(eo.Port)))
		}
		return nil
	}
	data, err := os.ReadFile(authFile)
	if err != nil {
		return fmt.Errorf("--auth: %w", err)
	}
	users, err := auth.ParseUsers(data)
	if err != nil {
		return fmt.Errorf("--auth %s: %w", authFile, err)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("making the runtime's password: %w", err)
	}
	eo.Users, eo.RuntimePassword = users, hex.EncodeToString(secret)
	cf.opts.User, cf.opts.Password = auth.RuntimeUser, eo.RuntimePassword
	return nil
}

// loopback reports whether host (an IP or a name) reaches only this machine. An empty host
// listens on every interface.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
