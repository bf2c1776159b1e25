package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
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
	rev, err := r.Put(e.ctx, Record{Name: "mid", Spec: json.RawMessage(`{"name":"mid","v":2}`), DeployedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Get(e.ctx, "mid")
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != rev || string(got.Spec) != `{"name":"mid","v":2}` || !got.DeployedAt.Equal(at) {
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
		if _, err := r.Put(e.ctx, Record{Name: n, Spec: json.RawMessage(`{"name":"` + n + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ch, err := r.Watch(ctx, nil)
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
	rev, err := r.Put(e.ctx, Record{Name: "c", Spec: json.RawMessage(`{"name":"c","x":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Deleted || ev.InitialDone || ev.Record.Name != "c" || ev.Record.Revision != rev || string(ev.Record.Spec) != `{"name":"c","x":1}` {
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
	ch, err := r.Watch(e.ctx, nil)
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

// TestRegistryInvalidRecords: a record whose key, name and spec names disagree, or that does
// not decode, is never delivered to a runtime (Watch hands it to skipped), Get refuses it
// naming the reason, List leaves it out and ListAll reports it beside the valid ones, and
// Delete removes it.
func TestRegistryInvalidRecords(t *testing.T) {
	e := newEnv(t)
	r := openRegistry(t, e)
	kv, err := e.js.KeyValue(e.ctx, DeploymentsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Put(e.ctx, Record{Name: "good", Spec: json.RawMessage(`{"name":"good"}`)}); err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{ // key -> stored value
		"evil":      `{"name":"evil","spec":{"name":"logincount"}}`,
		"renamed":   `{"name":"logincount","spec":{"name":"logincount"}}`,
		"garbage":   `{not json`,
		"shadowbad": `{"name":"shadowbad","spec":{"name":"shadowbad"},"shadow_of":"p","shadow_spec":{"name":"p"}}`,
		"nospec":    `{"name":"nospec"}`,
	}
	want := map[string]string{
		"evil":      `its spec names "logincount", not "evil"`,
		"renamed":   `its name "logincount" is not its key "renamed"`,
		"garbage":   "does not decode",
		"shadowbad": `its shadow_spec names "p", not "shadowbad"`,
		"nospec":    "its spec does not decode",
	}
	for k, v := range bad {
		if _, err := kv.Put(e.ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	for k, reason := range want {
		_, err := r.Get(e.ctx, k)
		if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), reason) {
			t.Errorf("Get(%s) = %v, want ErrBadRecord saying %q", k, err, reason)
		}
	}
	recs, invalid, err := r.ListAll(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Name != "good" {
		t.Errorf("ListAll records %+v, want only good", recs)
	}
	if len(invalid) != len(want) {
		t.Errorf("ListAll invalid %+v, want %d", invalid, len(want))
	}
	for _, inv := range invalid {
		if !strings.Contains(inv.Reason, want[inv.Key]) || inv.Revision == 0 {
			t.Errorf("invalid %+v, want reason %q", inv, want[inv.Key])
		}
	}
	if recs, err := r.List(e.ctx); err != nil || len(recs) != 1 {
		t.Errorf("List = %+v, %v; want only good", recs, err)
	}

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var mu sync.Mutex
	skipped := map[string]bool{}
	ch, err := r.Watch(ctx, func(inv Invalid) {
		mu.Lock()
		defer mu.Unlock()
		skipped[inv.Key] = true
	})
	if err != nil {
		t.Fatal(err)
	}
	var delivered []string
	for ev := range ch {
		if ev.InitialDone {
			break
		}
		delivered = append(delivered, ev.Record.Name)
	}
	if !slices.Equal(delivered, []string{"good"}) {
		t.Errorf("Watch delivered %v, want only good", delivered)
	}
	mu.Lock()
	if len(skipped) != len(want) {
		t.Errorf("Watch skipped %v, want every invalid record", skipped)
	}
	mu.Unlock()

	if err := r.Delete(e.ctx, "evil"); err != nil {
		t.Fatalf("deleting an invalid record: %v", err)
	}
	if _, err := r.Get(e.ctx, "evil"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after Delete, Get(evil) = %v", err)
	}
}

// TestLast: the record as last stored, also after its deletion; ErrNotFound for a name never
// stored, or purged.
func TestLast(t *testing.T) {
	e := newEnv(t)
	r, err := OpenRegistry(e.ctx, e.js, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1", "2"} {
		if _, err := r.Put(e.ctx, Record{Name: "d", Spec: json.RawMessage(`{"name":"d","v":` + v + `}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Delete(e.ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(e.ctx, "d"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	rec, err := r.Last(e.ctx, "d")
	if err != nil || string(rec.Spec) != `{"name":"d","v":2}` {
		t.Fatalf("Last after Delete = %s, %v", rec.Spec, err)
	}
	if _, err := r.Last(e.ctx, "never"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Last of a name never stored: %v", err)
	}
	if err := r.deployments.Purge(e.ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Last(e.ctx, "d"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Last after a purge: %v", err)
	}
}
