package service

import (
	"encoding/json"
	"testing"

	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/spec"
)

// TestShapeDecodedOncePerRevision: the loop decodes a record's spec once per revision for
// placement (every placement check applies each replicated record again). A record of the
// same revision is answered from what was decoded, even with its spec bytes changed under
// it; a new revision, or one whose spec does not decode, is decoded again.
func TestShapeDecodedOncePerRevision(t *testing.T) {
	sp, err := spec.ParseSpec([]byte("name: d\ninput: {subjects: [\"d.in\"]}\nkey: {field: k}\ntimeout: none\noutput: {subject: d.out}\n" +
		"partitions: 4\nreplication: changelog\nstandbys: 1\n"))
	testutil.Require(t, err)
	body, err := json.Marshal(sp)
	testutil.Require(t, err)
	s := &Service{shapes: map[string]shape{}}
	tests := []struct {
		name string
		rec  registry.Record
		want shape
	}{
		{"first revision", registry.Record{Name: "d", Spec: body, Revision: 3}, shape{revision: 3, replicated: true, partitions: 4, standbys: 1}},
		{"same revision, not decoded again", registry.Record{Name: "d", Spec: json.RawMessage(`{`), Revision: 3}, shape{revision: 3, replicated: true, partitions: 4, standbys: 1}},
		{"new revision whose spec does not decode", registry.Record{Name: "d", Spec: json.RawMessage(`{`), Revision: 4}, shape{revision: 4, partitions: 1}},
		{"another deployment", registry.Record{Name: "e", Spec: body, Revision: 4}, shape{revision: 4, replicated: true, partitions: 4, standbys: 1}},
	}
	for _, tt := range tests {
		if got := s.shapeOf(tt.rec); got != tt.want {
			t.Errorf("%s: shapeOf = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
