package partition_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/partition"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
)

// TestOfMatchesServer publishes keys to a stream whose subject transform appends the server's
// partition of the key token, and requires that partition to be Of's for every key: the
// contract that lets a deployment partition by subject token on the server or by key field
// in the runtime and get the same key groups.
func TestOfMatchesServer(t *testing.T) {
	const n = 16
	j := testutil.StartJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := j.JS.CreateStream(ctx, jetstream.StreamConfig{
		Name:     "EVENTS",
		Subjects: []string{"events.*"},
		Storage:  jetstream.MemoryStorage,
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source:      "events.*",
			Destination: fmt.Sprintf("events.{{wildcard(1)}}.{{partition(%d,1)}}", n),
		},
	})
	testutil.Require(t, err)

	// Keys as they appear in rows: strings (some with escapes that a subject token holds
	// decoded), integers, numbers whose canonical form is an integer, and a large one.
	var toks []string
	for i := range 200 {
		toks = append(toks, strconv.Quote(fmt.Sprintf("user-%d", i)))
	}
	for i := -50; i < 50; i++ {
		toks = append(toks, strconv.Itoa(i))
	}
	toks = append(toks, `"a\"b"`, `"back\\slash"`, `"\u00e9t\u00e9"`, `"ключ"`, `"日本"`, `"😀"`,
		`"\ud83d\ude00x"`, `"a/b"`, `"a\/b"`, `"-"`, `"_"`, `"$x"`, `"a*b"`, `"a>b"`, `"#"`,
		`42.0`, `4.2e1`, `1e3`, `123456789012345678901234567890`, `1e100`, `-0`)

	keys := make([][]byte, len(toks))
	seqs := make([]uint64, len(toks))
	for i, tok := range toks {
		keys[i] = canonical(t, tok)
		text := string(partition.AppendText(nil, keys[i]))
		ack, err := j.JS.Publish(ctx, "events."+text, []byte(tok))
		testutil.Require(t, err, "publishing", tok)
		seqs[i] = ack.Sequence
	}
	for i, tok := range toks {
		m, err := s.GetMsg(ctx, seqs[i])
		testutil.Require(t, err)
		dot := strings.LastIndexByte(m.Subject, '.')
		text := string(partition.AppendText(nil, keys[i]))
		if m.Subject[:dot] != "events."+text {
			t.Fatalf("%s: stored as %q, want the token %q", tok, m.Subject, text)
		}
		got, err := strconv.Atoi(m.Subject[dot+1:])
		testutil.Require(t, err, m.Subject)
		if want := partition.Of(keys[i], n); got != want {
			t.Fatalf("%s (key %s): the server put it in partition %d, Of says %d", tok, keys[i], got, want)
		}
	}
	t.Logf("%d keys: the server's partition equals Of for each", len(toks))
}
