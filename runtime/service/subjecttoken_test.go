package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/output"
	"github.com/groupstate/groupstate/runtime/internal/partition"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/timeouts"
)

// subjectTokenSpec is partitionedSpec with the key also token 2 of the input subject
// logins.<user>: the NATS server splits the input.
var subjectTokenSpec = strings.NewReplacer(
	`subjects: ["logins.>"]`, `subjects: ["logins.*"]`,
	"  field: user_id\n", "  field: user_id\n  subject_token: 2\n",
).Replace(partitionedSpec)

// loginRoundByToken publishes one login of each user on logins.<user>.
func (e *natsEnv) loginRoundByToken(users []string) {
	e.t.Helper()
	for _, u := range users {
		e.publish("logins."+u, fmt.Sprintf(`{"user_id":%q}`, u))
	}
}

// TestPartitionedBySubjectToken: a deployment of 4 partitions whose key is token 2 of its
// input subject runs on two runtimes with no router: the server splits the input (the
// partitioned stream sources it), every key's outputs are exactly 1..c, nothing but the
// partitions reads the partitioned stream and nothing reads the input stream. A row whose key
// field disagrees with its subject's token (another partition's key) is dead-lettered with
// reason wrong_partition and its input subject, and counted nowhere.
func TestPartitionedBySubjectToken(t *testing.T) {
	if !strings.Contains(subjectTokenSpec, "subject_token: 2") || !strings.Contains(subjectTokenSpec, `"logins.*"`) {
		t.Fatalf("spec not rewritten:\n%s", subjectTokenSpec)
	}
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	for range 2 {
		env.startRuntime(t.TempDir(), clock)
	}
	env.deploy(subjectTokenSpec, logincountWasm(t))
	env.waitOwners("logincount", func(o []string) bool {
		seen := map[string]bool{}
		for _, id := range o {
			seen[id] = true
		}
		return len(o) == 4 && len(seen) == 2 && !seen[""]
	})

	users := loginUsers(12)
	for n := 1; n <= 3; n++ {
		// logincount emits a key's total once a batch, so a round is awaited before the next.
		env.loginRoundByToken(users)
		env.waitCounted(users, n)
	}

	// A row on u0's subject whose key field is a user of another partition.
	const parts = 4
	tokenPart := partition.OfText([]byte("u0"), parts)
	var stray string
	for i := 0; stray == ""; i++ {
		if k := fmt.Sprintf("stray%d", i); partition.Of([]byte(fmt.Sprintf("%q", k)), parts) != tokenPart {
			stray = k
		}
	}
	env.publish("logins.u0", fmt.Sprintf(`{"user_id":%q}`, stray))
	var dlq []*jetstream.RawStreamMsg
	testutil.EventuallyWithin(t, compileDeadline, "the stray row dead-lettered", func() bool {
		dlq = env.streamMsgs("LOGINCOUNT_DLQ")
		return len(dlq) > 0
	})
	if len(dlq) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dlq))
	}
	h := dlq[0].Header
	if h.Get(output.HeaderReason) != engine.ReasonWrongPartition || h.Get(output.HeaderSubject) != "logins.u0" ||
		h.Get(output.HeaderKey) != fmt.Sprintf("%q", stray) || !strings.Contains(h.Get(output.HeaderError), "disagree") {
		t.Fatalf("dead letter %s with headers %v", dlq[0].Data, h)
	}
	env.loginRoundByToken(users)
	env.waitCounted(users, 4)
	if got := env.totalsByUser()[stray]; len(got) != 0 {
		t.Fatalf("the stray row was counted: %v", got)
	}

	// No router: no consumer on the input, only the partitions' on the partitioned stream,
	// which sources the input.
	ctx := context.Background()
	in, err := env.js.StreamNameBySubject(ctx, "logins.u0")
	testutil.Require(t, err)
	if names := env.consumerNames(in); len(names) != 0 {
		t.Fatalf("consumers on the input stream %s: %v, want none (no router)", in, names)
	}
	names := env.consumerNames(topology.PartitionedStream("logincount"))
	for p := range parts {
		if !contains(names, topology.Consumer(fmt.Sprintf("logincount-p%d", p))) {
			t.Errorf("partition %d's consumer missing: %v", p, names)
		}
	}
	if len(names) != parts {
		t.Errorf("consumers on the partitioned stream: %v", names)
	}
	st, err := env.js.Stream(ctx, topology.PartitionedStream("logincount"))
	testutil.Require(t, err)
	if cfg := st.CachedInfo().Config; len(cfg.Subjects) != 0 || len(cfg.Sources) != 1 || cfg.Sources[0].Name != in {
		t.Fatalf("partitioned stream %+v, want a source of %s and no subjects", cfg, in)
	}
	status, err := env.client.Status(ctx, "logincount")
	testutil.Require(t, err)
	if status.LastError != "" || status.Error != "" {
		t.Errorf("status error %q (last %q)", status.Error, status.LastError)
	}
	if status.State != client.StatusRunning || len(status.Partitions) != parts {
		t.Errorf("status %+v", status)
	}
	env.wantCounts("logincount", users, 4)
}

// consumerNames lists the consumers of stream.
func (e *natsEnv) consumerNames(stream string) []string {
	e.t.Helper()
	st, err := e.js.Stream(context.Background(), stream)
	testutil.Require(e.t, err)
	var names []string
	lister := st.ConsumerNames(context.Background())
	for n := range lister.Name() {
		names = append(names, n)
	}
	testutil.Require(e.t, lister.Err())
	return names
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestSubjectTokenFixedAtFirstDeploy: a partitioned deployment's redeploy may not switch
// between the router and the server splitting its input, nor change the input subjects or
// the token the server splits it by; the same subjects in another order, and any change
// without partitions, are fine.
func TestSubjectTokenFixedAtFirstDeploy(t *testing.T) {
	withSubjects := func(y, subjects string) string {
		return strings.Replace(y, `subjects: ["logins.*"]`, "subjects: "+subjects, 1)
	}
	for _, tc := range []struct {
		name, first, then, refused string // refused "": deployed
	}{
		{"router to server", partitionedSpec, subjectTokenSpec, "with no key.subject_token (the router splits the input), this spec key.subject_token 2"},
		{"server to router", subjectTokenSpec, partitionedSpec, "with key.subject_token 2 (the server splits the input), this spec no key.subject_token"},
		{"another token", withSubjects(subjectTokenSpec, `["logins.*.*"]`), strings.Replace(withSubjects(subjectTokenSpec, `["logins.*.*"]`), "subject_token: 2", "subject_token: 3", 1), "key.subject_token 3"},
		{"other subjects", subjectTokenSpec, withSubjects(subjectTokenSpec, `["logins.*", "signups.*"]`), `split by the server from input subjects ["logins.*"]`},
		{"reordered subjects", withSubjects(subjectTokenSpec, `["logins.*", "signups.*"]`), withSubjects(subjectTokenSpec, `["signups.*", "logins.*"]`), ""},
		{"one partition", strings.Replace(subjectTokenSpec, "partitions: 4\n", "", 1), strings.Replace(partitionedSpec, "partitions: 4\n", "", 1), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := startNATS(t)
			env.deploy(tc.first, logincountWasm(t))
			_, err := env.client.Deploy(context.Background(), specFromYAML(t, tc.then), logincountWasm(t))
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && (!errors.Is(err, client.ErrFixedAtFirstDeploy) || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("err = %v, want ErrFixedAtFirstDeploy saying %q", err, tc.refused)
			}
		})
	}
}
