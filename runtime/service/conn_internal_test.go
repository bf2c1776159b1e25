package service

import "testing"

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

func TestEmbeddedOptionsDefaults(t *testing.T) {
	o := EmbeddedOptions{DataDir: "x"}.withDefaults()
	if o.Host != "127.0.0.1" || o.Port != 4222 || o.Logger == nil {
		t.Fatalf("defaults: %+v", o)
	}
	if err := (EmbeddedOptions{DataDir: "x", Port: 70000}).validate(); err == nil {
		t.Fatal("port 70000 accepted")
	}
}
