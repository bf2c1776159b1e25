package topology_test

import (
	"slices"
	"testing"

	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/spec"
)

// TestNames pins the names of a deployment's streams, subjects, consumers and keyspaces:
// they are on disk and on NATS, so a change is a migration, not a refactoring.
func TestNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{topology.StreamName("login-count_in"), "GS_LOGIN-COUNT_IN"},
		{topology.StreamName("a.b c"), "GS_A_B_C"},
		{topology.InputStream("logincount"), "GS_LOGINCOUNT_IN"},
		{topology.NamedInputStream("ads", "clicks"), "GS_ADS_IN_CLICKS"},
		{topology.OutputStream("logincount"), "GS_LOGINCOUNT_OUT"},
		{topology.DeadLetterStream("logincount"), "GS_LOGINCOUNT_DLQ"},
		{topology.LateStream("logincount"), "GS_LOGINCOUNT_LATE"},
		{topology.Consumer("logincount"), "groupstate-logincount"},
		{topology.PartitionConsumer("logincount", 0, 1), "groupstate-logincount"},
		{topology.PartitionConsumer("logincount", 3, 4), "groupstate-logincount-p3"},
		{topology.RouterConsumer("logincount"), "groupstate-logincount-router"},
		{topology.Keyspace("logincount", 0, 1), "logincount"},
		{topology.Keyspace("logincount", 2, 4), "logincount.2"},
		{topology.InputsStream("ads"), "GS_ADS_INPUTS"},
		{topology.InputsFilter("ads"), "gs.in.ads.>"},
		{topology.PartitionedStream("logincount"), "GS_LOGINCOUNT_KG"},
		{topology.PartitionSubject("logincount", 7), "gs.kg.logincount.7"},
		{topology.PartitionFilter("logincount", 7, false), "gs.kg.logincount.7"},
		{topology.PartitionFilter("logincount", 7, true), "gs.kg.logincount.7.>"},
		{topology.ChangelogStream("logincount"), "GS_LOGINCOUNT_CL"},
		{topology.ChangelogSubject("logincount", 1), "gs.cl.logincount.1"},
		{topology.ChangelogFilter("logincount"), "gs.cl.logincount.>"},
		{topology.ManifestsStream("logincount"), "GS_LOGINCOUNT_BATCHES"},
		{topology.ManifestSubject("logincount", 1), "gs.batches.logincount.1"},
		{topology.ManifestsFilter("logincount"), "gs.batches.logincount.>"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestRead: where a partition reads, for each shape of deployment, and for a shadow (whose
// input-side streams are its primary's).
func TestRead(t *testing.T) {
	one := &spec.Spec{Name: "lc", Input: spec.InputSpec{Subjects: []string{"logins.>"}}}
	parts := &spec.Spec{Name: "lc", Partitions: 4, Input: spec.InputSpec{Subjects: []string{"logins.>"}}}
	byToken := &spec.Spec{Name: "lc", Partitions: 4, Input: spec.InputSpec{Subjects: []string{"logins.*"}}, Key: spec.KeySpec{SubjectToken: 2}}
	inputs := &spec.Spec{Name: "ads", Inputs: []spec.NamedInput{{Name: "clicks"}, {Name: "views"}}}
	for _, c := range []struct {
		name    string
		sp      *spec.Spec
		inputOf string
		p       int
		stream  string
		filters []string
	}{
		{"one partition, one input", one, "", 0, "LOGINS", []string{"logins.>"}},
		{"a partition", parts, "", 2, "GS_LC_KG", []string{"gs.kg.lc.2"}},
		{"a partition the server splits", byToken, "", 2, "GS_LC_KG", []string{"gs.kg.lc.2.>"}},
		{"several inputs", inputs, "", 0, "GS_ADS_INPUTS", []string{"gs.in.ads.>"}},
		{"a shadow's partition reads its primary's", parts, "primary", 1, "GS_PRIMARY_KG", []string{"gs.kg.primary.1"}},
	} {
		stream, filters := topology.Read(c.sp, c.inputOf, c.p, "LOGINS")
		if stream != c.stream || !slices.Equal(filters, c.filters) {
			t.Errorf("%s: %s %v, want %s %v", c.name, stream, filters, c.stream, c.filters)
		}
	}
}
