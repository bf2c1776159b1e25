package service_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/timeouts"
)

// TestDeployInitialState: a deployment split into partitions, deployed with an initial state,
// applies each key's state in its partition's first batch: a key only in the file is called
// with no rows (logincount emits its total), a key with rows counts on from its state, a key
// not in the file from nothing. A redeploy with an initial state is refused, and a restart
// does not apply the file again.
func TestDeployInitialState(t *testing.T) {
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	dir := t.TempDir()
	r := env.startRuntime(dir, clock)

	var file strings.Builder
	inFile := loginUsers(8)
	for i, u := range inFile {
		fmt.Fprintf(&file, `{"key": %q, "state": {"login_count": %d}}`+"\n", u, 10*(i+1))
	}
	ctx := context.Background()
	_, err := env.client.Deploy(ctx, specFromYAML(t, partitionedSpec), logincountWasm(t), client.WithInitialState([]byte(file.String())))
	testutil.Require(t, err)

	want := map[string][]int{}
	for i, u := range inFile {
		want[u] = []int{10 * (i + 1)} // the call with no rows in the first batch
	}
	env.waitTotalsByUser(want)

	users := loginUsers(10) // u8 and u9 are not in the file
	env.loginRound(users)
	for i, u := range users {
		if i < len(inFile) {
			want[u] = append(want[u], 10*(i+1)+1)
		} else {
			want[u] = []int{1}
		}
	}
	env.waitTotalsByUser(want)

	_, err = env.client.Deploy(ctx, specFromYAML(t, partitionedSpec), logincountWasm(t), client.WithInitialState([]byte(file.String())))
	if !errors.Is(err, client.ErrInitialStateRedeploy) {
		t.Fatalf("a redeploy with an initial state: %v, want ErrInitialStateRedeploy", err)
	}

	r.rs.stop()
	env.startRuntime(dir, clock)
	env.loginRound(users)
	for _, u := range users {
		want[u] = append(want[u], want[u][len(want[u])-1]+1)
	}
	env.waitTotalsByUser(want)
}

// waitTotalsByUser waits until the output stream holds exactly these totals per user, in
// order; a user with more outputs than wanted fails at once.
func (e *natsEnv) waitTotalsByUser(want map[string][]int) {
	e.t.Helper()
	var got map[string][]int
	testutil.EventuallyWithin(e.t, compileDeadline, fmt.Sprintf("totals %v", want), func() bool {
		got = e.totalsByUser()
		done := true
		for u, w := range want {
			if len(got[u]) > len(w) || !slices.Equal(got[u], w[:len(got[u])]) {
				e.t.Fatalf("%s's totals %v, want %v", u, got[u], w)
			}
			done = done && len(got[u]) == len(w)
		}
		return done && len(got) == len(want)
	})
}
