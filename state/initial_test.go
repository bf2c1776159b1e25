package state

import "testing"

// TestInitialStateApplied: the mark commits with its batch (not before), survives a reopen,
// reaches a copy made from the batches' reprs and from an export, and goes with Drop.
func TestInitialStateApplied(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir)
	d := s.Deployment("dep")
	applied := func(d *Deployment) bool {
		t.Helper()
		ok, err := d.InitialStateApplied()
		requireNoError(t, err)
		return ok
	}
	if applied(d) {
		t.Fatal("a new deployment says its initial state was applied")
	}
	log := &memReplicator{}
	d.SetReplicator(log)
	b := d.NewBatch(1)
	b.MarkInitialStateApplied()
	b.Set([]byte("k"), Entry{}, Entry{Value: []byte("v"), HasValue: true})
	if applied(d) {
		t.Fatal("marked before the commit")
	}
	_, err := b.Commit()
	requireNoError(t, err)
	if !applied(d) {
		t.Fatal("not marked after the commit")
	}

	copyOf := openMem(t).Deployment("dep")
	for _, w := range log.writes {
		requireNoError(t, copyOf.ApplyReplicated(w.Repr))
	}
	if !applied(copyOf) {
		t.Fatal("the replicated copy lost the mark")
	}
	exported := openMem(t).Deployment("dep")
	_, err = d.Export(DefaultExportChunk, func(repr []byte) error { return exported.ApplyReplicated(repr) })
	requireNoError(t, err)
	if !applied(exported) {
		t.Fatal("the exported copy lost the mark")
	}

	requireNoError(t, s.Close())
	s = openDisk(t, dir)
	defer s.Close()
	d = s.Deployment("dep")
	if !applied(d) {
		t.Fatal("the mark did not survive a reopen")
	}
	requireNoError(t, d.Drop())
	if applied(d) {
		t.Fatal("Drop kept the mark")
	}
}

// TestTimeMode: the mode commits with its batch, replicates, and a later batch that sets
// none keeps it.
func TestTimeMode(t *testing.T) {
	d := openMem(t).Deployment("dep")
	log := &memReplicator{}
	d.SetReplicator(log)
	if _, ok, err := d.TimeMode(); ok || err != nil {
		t.Fatalf("a new deployment's mode: %v %v", ok, err)
	}
	b := d.NewBatch(1)
	b.SetTimeMode(2)
	_, err := b.Commit()
	requireNoError(t, err)
	_, err = d.NewBatch(2).Commit()
	requireNoError(t, err)
	for _, dep := range []*Deployment{d, func() *Deployment {
		c := openMem(t).Deployment("dep")
		for _, w := range log.writes {
			requireNoError(t, c.ApplyReplicated(w.Repr))
		}
		return c
	}()} {
		mode, ok, err := dep.TimeMode()
		requireNoError(t, err)
		if !ok || mode != 2 {
			t.Fatalf("mode %d %v, want 2", mode, ok)
		}
	}
}
