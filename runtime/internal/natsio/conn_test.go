package natsio

import (
	"net"
	"strings"
	"testing"
)

func TestConnectRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	u := "nats://" + addr
	_, err = Connect(ConnOptions{URL: u, Logger: quiet})
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	if !strings.Contains(err.Error(), u) || !strings.Contains(err.Error(), "is groupstate serve running?") {
		t.Fatalf("error %q should name %s and hint at groupstate serve", err, u)
	}
}

func TestConnect(t *testing.T) {
	e := newEnv(t)
	if !e.nc.IsConnected() {
		t.Fatal("not connected")
	}
}

func TestDefaultURL(t *testing.T) {
	t.Setenv("NATS_URL", "")
	if got := DefaultURL(); got != "nats://127.0.0.1:4222" {
		t.Fatalf("DefaultURL() = %q", got)
	}
	t.Setenv("NATS_URL", "nats://example:4333")
	if got := DefaultURL(); got != "nats://example:4333" {
		t.Fatalf("DefaultURL() = %q with $NATS_URL", got)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://a:secret@h:1":        "nats://a:xxxxx@h:1",
		"nats://tok@h:1,nats://h2:2": "nats://xxxxx@h:1,nats://h2:2",
		"nats://h:1":                 "nats://h:1",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
