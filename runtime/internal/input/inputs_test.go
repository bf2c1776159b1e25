package input

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/internal/topology"
)

// TestInputsStream: the inputs stream sources every input's stream (two inputs sharing one,
// a third on its own), each row lands on "gs.in.<deployment>.<input>.<its subject>", from
// which SplitInputsSubject gives the input and the subject back; ensuring it again changes
// nothing, and other inputs are refused with ErrInputsChanged.
func TestInputsStream(t *testing.T) {
	js := testutil.StartJetStream(t).JS
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ads, err := natsio.EnsureStream(ctx, js, natsio.StreamOptions{Name: "ADS", Subjects: []string{"ads.>"}})
	testutil.Require(t, err)
	other, err := natsio.EnsureStream(ctx, js, natsio.StreamOptions{Name: "OTHER", Subjects: []string{"o.*.x"}})
	testutil.Require(t, err)
	inputs := []NamedInput{
		{Name: "impressions", Stream: ads, Subjects: []string{"ads.impressions.>"}},
		{Name: "clicks", Stream: ads, Subjects: []string{"ads.clicks.*"}},
		{Name: "other", Stream: other, Subjects: []string{"o.*.x"}},
	}
	testutil.Require(t, EnsureInputsStream(ctx, js, "dep", inputs, 1, time.Hour))
	testutil.Require(t, EnsureInputsStream(ctx, js, "dep", inputs, 1, time.Hour)) // nothing to change
	st, err := js.Stream(ctx, topology.InputsStream("dep"))
	testutil.Require(t, err)
	if cfg := st.CachedInfo().Config; len(cfg.Subjects) != 0 || len(cfg.Sources) != 2 || cfg.MaxAge != time.Hour {
		t.Fatalf("config %+v", cfg)
	}
	want := map[string][2]string{ // published subject -> input, subject given back
		"ads.impressions.eu.1": {"impressions", "ads.impressions.eu.1"},
		"ads.clicks.7":         {"clicks", "ads.clicks.7"},
		"o.y.x":                {"other", "o.y.x"},
	}
	for s := range want {
		_, err := js.Publish(ctx, s, []byte(fmt.Sprintf(`{"s":%q}`, s)))
		testutil.Require(t, err)
	}
	_, err = js.Publish(ctx, "ads.elsewhere", []byte(`{}`)) // in ADS, but no input's
	testutil.Require(t, err)
	cons, err := js.OrderedConsumer(ctx, topology.InputsStream("dep"), jetstream.OrderedConsumerConfig{FilterSubjects: []string{topology.InputsFilter("dep")}})
	testutil.Require(t, err)
	got := map[string][2]string{}
	for len(got) < len(want) {
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		testutil.Require(t, err)
		in, orig, ok := SplitInputsSubject("dep", m.Subject())
		if !ok {
			t.Fatalf("subject %q is not an inputs subject", m.Subject())
		}
		got[orig] = [2]string{in, orig}
	}
	for s, w := range want {
		if got[s] != w {
			t.Errorf("%s: got %v, want %v", s, got[s], w)
		}
	}
	if n := st.CachedInfo().State.Msgs; n > 3 {
		t.Errorf("%d messages, want at most the 3 of the inputs", n)
	}

	pending, err := InputsPending(ctx, js, "dep", []string{"impressions", "clicks", "other"}, 1)
	testutil.Require(t, err)
	if n := pending["impressions"] + pending["clicks"] + pending["other"]; n != 2 {
		t.Fatalf("pending after sequence 1: %v, want 2 rows in all", pending)
	}
	if pending, _ := InputsPending(ctx, js, "dep", []string{"clicks"}, 3); pending["clicks"] != 0 {
		t.Fatalf("pending after the last sequence: %v", pending)
	}
	if si, err := st.Info(ctx); err != nil || si.State.Consumers != 1 {
		t.Fatalf("consumers on the inputs stream: %v %v, want only the test's own", si, err)
	}

	changed := append([]NamedInput(nil), inputs...)
	changed[1].Subjects = []string{"ads.clicks.>"}
	if err := EnsureInputsStream(ctx, js, "dep", changed, 1, time.Hour); !errors.Is(err, ErrInputsChanged) {
		t.Fatalf("changed inputs: %v, want ErrInputsChanged", err)
	}
	if err := CheckInputsStream(ctx, js, "dep", changed); !errors.Is(err, ErrInputsChanged) {
		t.Fatalf("CheckInputsStream of changed inputs: %v, want ErrInputsChanged", err)
	}
	unnamed := append([]NamedInput(nil), inputs...)
	for i := range unnamed {
		unnamed[i].Stream = ""
	}
	testutil.Require(t, CheckInputsStream(ctx, js, "dep", unnamed))
	testutil.Require(t, CheckInputsStream(ctx, js, "other", changed)) // no stream yet
}

func TestSplitInputsSubject(t *testing.T) {
	for _, c := range []struct {
		s, input, orig string
		ok             bool
	}{
		{"gs.in.dep.clicks.ads.clicks.1", "clicks", "ads.clicks.1", true},
		{"gs.in.dep.clicks", "", "", false},
		{"gs.in.depx.clicks.a", "", "", false},
		{"gs.kg.dep.0", "", "", false},
	} {
		in, orig, ok := SplitInputsSubject("dep", c.s)
		if in != c.input || orig != c.orig || ok != c.ok {
			t.Errorf("SplitInputsSubject(%q) = %q %q %v", c.s, in, orig, ok)
		}
	}
}
