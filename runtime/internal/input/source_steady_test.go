package input

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/nats-io/nats.go/jetstream"
)

// TestSourceFetchWhilePublishing fetches with the runtime's bounds (many rows, a byte bound,
// a wait) while messages are published one at a time, on one server and on a 3-node cluster
// with a stream of three replicas: every Fetch succeeds, and every message comes once, in
// order. The byte-bounded rest of a fetch may end with the server's "batch completed" status
// (the request was filled by count with bytes to spare); that is the normal end of a pull
// request, not an error.
func TestSourceFetchWhilePublishing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		js       func(t *testing.T) jetstream.JetStream
		replicas int
	}{
		{"server", func(t *testing.T) jetstream.JetStream { return testutil.StartJetStream(t).JS }, 1},
		{"cluster", func(t *testing.T) jetstream.JetStream { return testutil.StartCluster(t, 3).JetStream(t) }, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := tc.js(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			stream, err := natsio.EnsureStream(ctx, js, natsio.StreamOptions{Name: "IN", Subjects: []string{"in.>"}, Replicas: tc.replicas})
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewSource(ctx, js, stream, "dep", []string{"in.>"})
			if err != nil {
				t.Fatal(err)
			}
			const n = 600
			pubDone := make(chan error, 1)
			go func() {
				for i := 0; i < n; i++ {
					if _, err := js.Publish(ctx, "in.a", fmt.Appendf(nil, "m%d", i)); err != nil {
						pubDone <- err
						return
					}
					if i%7 == 6 {
						time.Sleep(2 * time.Millisecond) // bursts: fetches find some messages pending
					}
				}
				pubDone <- nil
			}()
			var got []Msg
			fetches := 0
			for len(got) < n {
				ms, err := s.Fetch(ctx, 10000, 16<<20, 200*time.Millisecond)
				if err != nil {
					t.Fatalf("fetch %d, after %d messages: %v", fetches, len(got), err)
				}
				fetches++
				got = append(got, ms...)
				time.Sleep(3 * time.Millisecond) // a batch runs: more arrive meanwhile
			}
			if err := <-pubDone; err != nil {
				t.Fatal(err)
			}
			checkSeqs(t, got, 1)
			if s.epoch != 1 {
				// Each rewind after the first (NewSource's) followed deliveries lost in the client.
				t.Errorf("the consumer was rewound %d times after a gap; want none", s.epoch-1)
			}
			t.Logf("%d messages in %d fetches", n, fetches)
		})
	}
}

func TestServerAtLeast(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"2.15.2", true}, {"2.14.0", true}, {"3.0.0", true}, {"2.13.9", false}, {"1.99.0", false},
		{"2.14.0-beta.1", true}, {"", false}, {"2", false}, {"x.y", false},
	} {
		if got := serverAtLeast(tc.v, 2, 14); got != tc.want {
			t.Errorf("serverAtLeast(%q, 2, 14) = %v, want %v", tc.v, got, tc.want)
		}
	}
}
