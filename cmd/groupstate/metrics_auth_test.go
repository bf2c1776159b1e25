package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMetricsGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("metrics")) })
	write := func(content string) string {
		p := filepath.Join(t.TempDir(), "auth")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	type req struct {
		bearer, user, password string
		want                   int
	}
	for _, c := range []struct {
		file string
		reqs []req
	}{
		{"", []req{{want: 200}}},
		{write("bearer 0123456789abcdef-token\n"), []req{{want: 401}, {bearer: "wrong-token-0123456789", want: 401}, {bearer: "0123456789abcdef-token", want: 200}, {user: "x", password: "0123456789abcdef-token", want: 401}}},
		{write("basic prom:p4ssw0rd-long"), []req{{want: 401}, {user: "prom", password: "wrong-password", want: 401}, {user: "prom", password: "p4ssw0rd-long", want: 200}, {bearer: "p4ssw0rd-long", want: 401}}},
	} {
		guard, err := metricsGuard(c.file)
		if err != nil {
			t.Fatal(err)
		}
		h := guard(ok)
		for _, r := range c.reqs {
			hr := httptest.NewRequest("GET", "/metrics", nil)
			if r.bearer != "" {
				hr.Header.Set("Authorization", "Bearer "+r.bearer)
			}
			if r.user != "" {
				hr.SetBasicAuth(r.user, r.password)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, hr)
			if w.Code != r.want {
				t.Errorf("file %q, request %+v: %d, want %d", c.file, r, w.Code, r.want)
			}
		}
	}
	for content, want := range map[string]string{
		"bearer short":     "at least 16 characters",
		"basic nopassword": "basic USER:PASSWORD",
		"token x":          "first line must be",
		"":                 "first line must be",
	} {
		if _, err := metricsGuard(write(content)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("metricsGuard(%q) = %v, want an error saying %q", content, err, want)
		}
	}
	if _, err := metricsGuard(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing file accepted")
	}
}
