package service

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/runner"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/spec"
)

// checkNow checks rec as the service's loop does: check answers errChecking at once, the
// check runs off the loop, and its result reaches the loop (checkDone), which asks again.
func checkNow(t *testing.T, s *Service, rec registry.Record) (*runner.Revision, error) {
	t.Helper()
	rv, err := s.check(context.Background(), rec)
	if !errors.Is(err, errChecking) {
		t.Fatalf("check answered %v, %v at once; want errChecking", rv, err)
	}
	s.checkedOff(<-s.checkDone)
	return s.check(context.Background(), rec)
}

// TestCheckReusesAcceptedRecord: a record check accepted is not loaded and compiled again
// (the partitions of a deployment a runtime takes one after another), while another
// revision of it is: with its module deleted from the registry meanwhile, the same record
// still passes and a new revision fails. The loop never waits for a check (checkNow).
func TestCheckReusesAcceptedRecord(t *testing.T) {
	j := testutil.StartJetStream(t)
	ctx := context.Background()
	s, err := New(ctx, Options{DataDir: t.TempDir(), Conn: j.Conn, Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	t.Cleanup(func() { s.rt.Close(ctx) })
	digest, err := s.reg.PutModule(ctx, testutil.ReadFile(t, "../../samples/logincount/go/logincount.wasm"))
	testutil.Require(t, err)
	sp, err := spec.ParseSpec([]byte("name: logincount\ninput: {subjects: [\"logins.>\"]}\nkey: {field: user_id}\ntimeout: none\noutput: {subject: logincount.out}\n"))
	testutil.Require(t, err)
	body, err := json.Marshal(sp)
	testutil.Require(t, err)
	rec := registry.Record{Name: "logincount", Spec: body, ModuleDigest: digest, Revision: 7}

	first, err := checkNow(t, s, rec)
	testutil.Require(t, err)
	modules, err := j.JS.ObjectStore(ctx, registry.ModulesBucket)
	testutil.Require(t, err)
	testutil.Require(t, modules.Delete(ctx, digest))

	again, err := s.check(ctx, rec)
	testutil.Require(t, err)
	if again.Spec != first.Spec || &again.Wasm[0] != &first.Wasm[0] {
		t.Fatal("the accepted record was checked again")
	}
	next := rec
	next.Revision = 8
	if _, err := checkNow(t, s, next); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("a new revision without its module: err = %v, want natsio.ErrNotFound", err)
	}
}
