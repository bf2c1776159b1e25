package service

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/groupstate/groupstate/runtime/internal/api"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/state"
)

// TestAnswerVars: the state API answers for an ABI v2 deployment with each key's variables
// that hold something as one object (the shape of an initial-state line's state) and its
// timers; keys list the keys with variables or timers; a key without either is not found.
func TestAnswerVars(t *testing.T) {
	st, err := state.Open(t.TempDir(), &state.Options{Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	defer st.Close()
	d := st.Deployment("carts")
	b := d.NewBatch(1)
	vars, err := b.DeclareVars([]state.VarDecl{
		{Name: "items", Kind: state.VarMap},
		{Name: "history", Kind: state.VarList, TTLMs: 60_000},
		{Name: "abandon_at", Kind: state.VarValue},
		{Name: "remind_at", Kind: state.VarValue},
	})
	testutil.Require(t, err)
	tx := b.Key(vars, []byte(`"ada"`), 1000)
	testutil.Require(t, tx.MapSet(0, []byte("apple"), []byte(`{"qty":2,"price":1.5}`)))
	testutil.Require(t, tx.ListAppend(1, []byte(`"add"`), []byte(`"add"`)))
	testutil.Require(t, tx.ValueSet(2, []byte(`4000`)))
	testutil.Require(t, tx.TimerRegister(4000))
	testutil.Require(t, tx.Commit())
	tx = b.Key(vars, []byte(`"bob"`), 1000)
	testutil.Require(t, tx.TimerRegister(9000))
	testutil.Require(t, tx.Commit())
	_, err = b.Commit()
	testutil.Require(t, err)

	ask := func(verb string, req any, nowMs int64, reply any) {
		t.Helper()
		data, _ := json.Marshal(req)
		got, err := answer(d, verb, data, nowMs)
		testutil.Require(t, err)
		raw, _ := json.Marshal(got)
		testutil.Require(t, json.Unmarshal(raw, reply))
	}
	var r api.StateReply
	ask(api.VerbState, api.StateRequest{Key: json.RawMessage(`"ada"`)}, 2000, &r)
	if want := `{"items":{"apple":{"qty":2,"price":1.5}},"history":["add","add"],"abandon_at":4000}`; !r.Found || string(r.Value) != want || len(r.Timers) != 1 || r.Timers[0] != 4000 {
		t.Fatalf("ada: %+v (value %s), want found, %s, timers [4000]", r, r.Value, want)
	}
	ask(api.VerbState, api.StateRequest{Key: json.RawMessage(`"ada"`)}, 61_000, &r)
	if want := `{"items":{"apple":{"qty":2,"price":1.5}},"abandon_at":4000}`; string(r.Value) != want {
		t.Fatalf("ada after history's TTL: %s, want %s", r.Value, want)
	}
	r = api.StateReply{}
	ask(api.VerbState, api.StateRequest{Key: json.RawMessage(`"bob"`)}, 2000, &r)
	if !r.Found || r.HasValue || len(r.Timers) != 1 {
		t.Fatalf("bob, a timer only: %+v", r)
	}
	r = api.StateReply{}
	ask(api.VerbState, api.StateRequest{Key: json.RawMessage(`"cy"`)}, 2000, &r)
	if r.Found {
		t.Fatalf("cy, no state: %+v", r)
	}
	var keys api.KeysReply
	ask(api.VerbKeys, api.KeysRequest{Limit: 1}, 2000, &keys)
	if len(keys.Keys) != 1 || string(keys.Keys[0].Key) != `"ada"` || string(keys.Next) != `"ada"` {
		t.Fatalf("first page of keys: %+v", keys)
	}
	keys = api.KeysReply{}
	ask(api.VerbKeys, api.KeysRequest{After: keys.Next, Limit: 10}, 2000, &keys)
	if len(keys.Keys) != 2 {
		t.Fatalf("every key: %+v", keys)
	}
}

// TestRespondOversized: a reply above the server's max_payload is replaced by an error that
// says so, so the request gets an answer instead of none.
func TestRespondOversized(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, MaxPayload: 8 << 10})
	testutil.Require(t, err)
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	nc, err := nats.Connect(srv.ClientURL())
	testutil.Require(t, err)
	defer nc.Close()
	big := api.KeysReply{}
	for i := range 200 {
		big.Keys = append(big.Keys, api.KeyState{Key: json.RawMessage(fmt.Sprintf(`"key-%04d"`, i)), Value: json.RawMessage(`"` + strings.Repeat("v", 100) + `"`), HasValue: true})
	}
	small := api.KeysReply{Keys: big.Keys[:2]}
	sub, err := nc.Subscribe("page.*", func(m *nats.Msg) {
		if m.Subject == "page.big" {
			respond(m, big, nc.MaxPayload())
		} else {
			respond(m, small, nc.MaxPayload())
		}
	})
	testutil.Require(t, err)
	defer sub.Unsubscribe()
	msg, err := nc.Request("page.big", nil, 5*time.Second)
	testutil.Require(t, err, "an oversized page gets an answer")
	var e api.Error
	if json.Unmarshal(msg.Data, &e) != nil || !strings.Contains(e.Error, "above the NATS server's max_payload of 8192") || !strings.Contains(e.Error, "fewer keys") {
		t.Fatalf("oversized page answered %s", msg.Data)
	}
	msg, err = nc.Request("page.small", nil, 5*time.Second)
	testutil.Require(t, err)
	var page api.KeysReply
	if json.Unmarshal(msg.Data, &page) != nil || len(page.Keys) != 2 {
		t.Fatalf("small page answered %s", msg.Data)
	}
}
