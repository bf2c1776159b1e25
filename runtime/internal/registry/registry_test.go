package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func openRegistry(t *testing.T, e *env) *Registry {
	t.Helper()
	r, err := OpenRegistry(e.ctx, e.js, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRegistryRecords(t *testing.T) {
	e := newEnv(t)
	r := openRegistry(t, e)

	if recs, err := r.List(e.ctx); err != nil || recs == nil || len(recs) != 0 {
		t.Fatalf("empty list: %v, %v", recs, err)
	}
	if _, err := r.Get(e.ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if err := r.Delete(e.ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
	if _, err := r.Put(e.ctx, Record{}); !errors.Is(err, ErrNoName) {
		t.Fatalf("put without name: %v", err)
	}

	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, n := range []string{"zeta", "alpha", "mid"} {
		if _, err := r.Put(e.ctx, Record{Name: n, Spec: json.RawMessage(`{"name":"` + n + `"}`), ModuleDigest: Digest([]byte(n)), ModuleSize: 3, DeployedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := r.Put(e.ctx, Record{Name: "mid", Spec: json.RawMessage(`{"v":2}`), DeployedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Get(e.ctx, "mid")
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != rev || string(got.Spec) != `{"v":2}` || !got.DeployedAt.Equal(at) {
		t.Fatalf("get mid: %+v (rev %d)", got, rev)
	}
	recs, err := r.List(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[0].Name != "alpha" || recs[1].Name != "mid" || recs[2].Name != "zeta" || recs[0].Revision == 0 {
		t.Fatalf("list: %+v", recs)
	}
	if err := r.Delete(e.ctx, "mid"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(e.ctx, "mid"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if recs, _ := r.List(e.ctx); len(recs) != 2 {
		t.Fatalf("list after delete: %+v", recs)
	}

	// Status documents.
	if _, err := r.GetStatus(e.ctx, "alpha"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing status: %v", err)
	}
	if err := r.PutStatus(e.ctx, "alpha", []byte(`{"rows":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.PutStatus(e.ctx, "alpha", []byte(`{"rows":2}`)); err != nil {
		t.Fatal(err)
	}
	if doc, err := r.GetStatus(e.ctx, "alpha"); err != nil || string(doc) != `{"rows":2}` {
		t.Fatalf("status %s, %v", doc, err)
	}
}

func TestRegistryModules(t *testing.T) {
	e := newEnv(t)
	r := openRegistry(t, e)
	wasm := append([]byte("\x00asm\x01\x00\x00\x00"), bytes.Repeat([]byte{7}, 300_000)...)
	d, err := r.PutModule(e.ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	if d != Digest(wasm) || len(d) != 64 {
		t.Fatalf("digest %q", d)
	}
	info, err := r.modules.GetInfo(e.ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	// Same bytes again: no new upload.
	if d2, err := r.PutModule(e.ctx, wasm); err != nil || d2 != d {
		t.Fatalf("second put: %q, %v", d2, err)
	}
	info2, err := r.modules.GetInfo(e.ctx, d)
	if err != nil || info2.NUID != info.NUID {
		t.Fatalf("module uploaded again (nuid %s -> %s), %v", info.NUID, info2.NUID, err)
	}
	b, err := r.GetModule(e.ctx, d)
	if err != nil || !bytes.Equal(b, wasm) {
		t.Fatalf("get module: %d bytes, %v", len(b), err)
	}

	// Tampering: an object stored under another module's digest.
	other := Digest([]byte("the real module"))
	if _, err := r.modules.PutBytes(e.ctx, other, []byte("evil module")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetModule(e.ctx, other); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("tampered module: %v", err)
	}
	if _, err := r.GetModule(e.ctx, Digest([]byte("absent"))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("absent module: %v", err)
	}
	if _, err := r.GetModule(e.ctx, "../etc"); !errors.Is(err, ErrBadDigest) {
		t.Fatalf("malformed digest: %v", err)
	}
}

func TestRegistryWatch(t *testing.T) {
	e := newEnv(t)
	r := openRegistry(t, e)
	for _, n := range []string{"a", "b"} {
		if _, err := r.Put(e.ctx, Record{Name: n, Spec: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ch, err := r.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func() Event {
		t.Helper()
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch channel closed")
			}
			return ev
		case <-time.After(5 * time.Second):
			t.Fatal("no watch event within 5s")
		}
		return Event{}
	}
	initial := map[string]bool{}
	for {
		ev := next()
		if ev.InitialDone {
			break
		}
		if ev.Deleted {
			t.Fatalf("deletion among initial values: %+v", ev)
		}
		initial[ev.Record.Name] = true
	}
	if len(initial) != 2 || !initial["a"] || !initial["b"] {
		t.Fatalf("initial records %v", initial)
	}
	rev, err := r.Put(e.ctx, Record{Name: "c", Spec: json.RawMessage(`{"x":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Deleted || ev.InitialDone || ev.Record.Name != "c" || ev.Record.Revision != rev || string(ev.Record.Spec) != `{"x":1}` {
		t.Fatalf("put event %+v", ev)
	}
	if err := r.Delete(e.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if ev := next(); !ev.Deleted || ev.Record.Name != "a" {
		t.Fatalf("delete event %+v", ev)
	}
	cancel()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch channel not closed after cancel")
		}
	}
}

func TestRegistryWatchEmpty(t *testing.T) {
	e := newEnv(t)
	r := openRegistry(t, e)
	ch, err := r.Watch(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if !ev.InitialDone {
			t.Fatalf("first event on empty bucket %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no InitialDone on an empty bucket")
	}
}

func TestOpenRegistryConcurrent(t *testing.T) {
	for round := range 3 {
		e := newEnv(t)
		// Two processes: two connections.
		nc2 := e.nats.Connect(t)
		js2, err := jetstream.New(nc2)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				js := e.js
				if i%2 == 1 {
					js = js2
				}
				_, errs[i] = OpenRegistry(e.ctx, js, 0)
			}()
		}
		wg.Wait()
		nc2.Close()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d open %d: %v", round, i, err)
			}
		}
	}
}

func TestRegistryOwners(t *testing.T) {
	e := newEnv(t)
	r, err := OpenRegistry(e.ctx, e.js, 0)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := r.Claim(e.ctx, "dep", "rt1"); err != nil || o != "rt1" {
		t.Fatalf("first claim: %q %v", o, err)
	}
	if o, err := r.Claim(e.ctx, "dep", "rt1"); err != nil || o != "rt1" {
		t.Fatalf("claim again by the owner: %q %v", o, err)
	}
	if o, err := r.Claim(e.ctx, "dep", "rt2"); err != nil || o != "rt1" {
		t.Fatalf("claim by another runtime: %q %v", o, err)
	}
	if err := r.Disown(e.ctx, "dep"); err != nil {
		t.Fatal(err)
	}
	if err := r.Disown(e.ctx, "dep"); err != nil {
		t.Fatalf("disowning a deployment without an owner: %v", err)
	}
	if o, err := r.Claim(e.ctx, "dep", "rt2"); err != nil || o != "rt2" {
		t.Fatalf("claim after disown: %q %v", o, err)
	}
}
