package history_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/groupstate/groupstate/runtime/internal/history"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/spec"
)

// TestRow: a stored message becomes the row the runtime made of it: the subject it was
// published on (from a routed message's header, a server-partitioned subject's tail, an
// inputs subject's tail with the input's index), named after the deployment whose streams
// hold it (a promoted shadow reads its old primary's).
func TestRow(t *testing.T) {
	one := &spec.Spec{Name: "carts", Input: spec.InputSpec{Subjects: []string{"carts.>"}}}
	parts := &spec.Spec{Name: "carts", Partitions: 4, Input: spec.InputSpec{Subjects: []string{"carts.>"}}}
	inputs := &spec.Spec{Name: "carts", Inputs: []spec.NamedInput{
		{Name: "adds", InputSpec: spec.InputSpec{Subjects: []string{"carts.add"}}},
		{Name: "pays", InputSpec: spec.InputSpec{Subjects: []string{"pay.>"}}},
	}}
	routed := nats.Header{input.RoutedSubjectHeader: []string{"carts.web"}}
	for _, tc := range []struct {
		name          string
		sp            *spec.Spec
		inputOf       string
		msg           input.StoredMsg
		subject, fail string
		input         int
	}{
		{"one input", one, "", input.StoredMsg{Subject: "carts.web"}, "carts.web", "", 0},
		{"routed", parts, "", input.StoredMsg{Subject: topology.PartitionSubject("carts", 2), Header: routed}, "carts.web", "", 0},
		{"routed, of the old primary", parts, "carts-v1", input.StoredMsg{Subject: topology.PartitionSubject("carts-v1", 2), Header: routed}, "carts.web", "", 0},
		{"split by the server", parts, "", input.StoredMsg{Subject: "gs.kg.carts.2.carts.web"}, "carts.web", "", 0},
		{"inputs", inputs, "", input.StoredMsg{Subject: "gs.in.carts.pays.pay.card"}, "pay.card", "", 1},
		{"inputs of the old primary", inputs, "carts-v1", input.StoredMsg{Subject: "gs.in.carts-v1.adds.carts.add"}, "carts.add", "", 0},
		{"inputs, another deployment's", inputs, "", input.StoredMsg{Subject: "gs.in.carts-v1.adds.carts.add"}, "", "not of one of the spec's inputs", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.msg.Sequence, tc.msg.Data = 7, []byte(`{}`)
			row, err := history.Row(tc.sp, tc.inputOf, tc.msg)
			switch {
			case tc.fail != "":
				if err == nil || !strings.Contains(err.Error(), tc.fail) {
					t.Fatalf("row %+v, err %v; want an error saying %q", row, err, tc.fail)
				}
			case err != nil:
				t.Fatal(err)
			case row.Subject != tc.subject || row.Input != tc.input || row.Sequence != 7:
				t.Fatalf("row %+v, want subject %s, input %d, sequence 7", row, tc.subject, tc.input)
			}
		})
	}
}
