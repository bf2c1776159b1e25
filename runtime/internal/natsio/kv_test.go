package natsio

import (
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestPurgeKeys: the keys matching the filters go, with their history; others stay; a
// bucket that does not exist holds nothing.
func TestPurgeKeys(t *testing.T) {
	e := newEnv(t)
	kv, err := e.js.CreateKeyValue(e.ctx, jetstream.KeyValueConfig{Bucket: "purgekeys", History: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "a.0", "a.1", "ab", "ab.0", "b"} {
		for range 2 {
			if _, err := kv.Put(e.ctx, k, []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
	}
	keys, err := PurgeKeys(e.ctx, e.js, "purgekeys", "a", "a.*")
	if err != nil || !slices.Equal(keys, []string{"a", "a.0", "a.1"}) {
		t.Fatalf("PurgeKeys = %v, %v", keys, err)
	}
	for _, k := range []string{"a", "a.0"} {
		if hist, err := kv.History(e.ctx, k); err == nil && slices.ContainsFunc(hist, func(e jetstream.KeyValueEntry) bool { return e.Operation() == jetstream.KeyValuePut }) {
			t.Errorf("%s keeps its history", k)
		}
	}
	for _, k := range []string{"ab", "ab.0", "b"} {
		if _, err := kv.Get(e.ctx, k); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	if keys, err := PurgeKeys(e.ctx, e.js, "nosuchbucket", ">"); err != nil || keys != nil {
		t.Errorf("a bucket that does not exist: %v, %v", keys, err)
	}
}
