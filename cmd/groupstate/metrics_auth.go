package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// metricsGuard returns what /metrics is wrapped in: nothing when file is empty, else a check
// of the credential its first line gives, "bearer TOKEN" (an Authorization: Bearer header)
// or "basic USER:PASSWORD" (HTTP basic authentication). Other requests get 401.
func metricsGuard(file string) (func(http.Handler) http.Handler, error) {
	if file == "" {
		return func(h http.Handler) http.Handler { return h }, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--metrics-auth: %w", err)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
	kind, cred, _ := strings.Cut(strings.TrimSpace(line), " ")
	cred = strings.TrimSpace(cred)
	var ok func(r *http.Request) bool
	switch strings.ToLower(kind) {
	case "bearer":
		if len(cred) < 16 {
			return nil, fmt.Errorf("--metrics-auth %s: a bearer token of at least 16 characters", file)
		}
		ok = func(r *http.Request) bool {
			scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
			return strings.EqualFold(scheme, "bearer") && same(token, cred)
		}
	case "basic":
		user, password, found := strings.Cut(cred, ":")
		if !found || user == "" || len(password) < 8 {
			return nil, fmt.Errorf("--metrics-auth %s: 'basic USER:PASSWORD' with a password of at least 8 characters", file)
		}
		ok = func(r *http.Request) bool {
			u, p, given := r.BasicAuth()
			return given && same(u, user) && same(p, password)
		}
	default:
		return nil, fmt.Errorf("--metrics-auth %s: the first line must be 'bearer TOKEN' or 'basic USER:PASSWORD'", file)
	}
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !ok(r) {
				w.Header().Set("WWW-Authenticate", map[bool]string{true: `Bearer realm="groupstate"`, false: `Basic realm="groupstate"`}[strings.EqualFold(kind, "bearer")])
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}, nil
}

// same compares a and b in time that does not depend on where they differ.
func same(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}
