package runner

import (
	"encoding/json"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/input"
)

// TestCutShadow: a shadow's batch is a primary batch's first chunk and the chunks that
// continued it, up to the one not open; a batch whose last chunk has not come waits for it,
// unless no more will come; leading continued chunks (their first gone) are dropped.
func TestCutShadow(t *testing.T) {
	first, open, cont, last := engine.Manifest{}, engine.Manifest{Open: true}, engine.Manifest{Continued: true, Open: true}, engine.Manifest{Continued: true}
	for _, tc := range []struct {
		name        string
		pending     []engine.Manifest
		ended       bool
		batch, rest int
		more        bool
	}{
		{"one batch", []engine.Manifest{first}, false, 1, 0, false},
		{"the first of two", []engine.Manifest{first, first}, false, 1, 1, false},
		{"chunks", []engine.Manifest{open, cont, last, first}, false, 3, 1, false},
		{"a chunk missing", []engine.Manifest{open, cont}, false, 0, 2, true},
		{"a chunk missing, no more to come", []engine.Manifest{open, cont}, true, 2, 0, false},
		{"leading continued chunks", []engine.Manifest{cont, last, first}, false, 1, 0, false},
		{"nothing", nil, false, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var msgs []input.Msg
			for i, m := range tc.pending {
				data, _ := json.Marshal(m)
				msgs = append(msgs, input.Msg{Data: data, Sequence: uint64(i + 1)})
			}
			b, rest, more, err := cutShadow(msgs, tc.ended)
			batch := b.msgs
			if err != nil || len(batch) != tc.batch || len(rest) != tc.rest || more != tc.more {
				t.Fatalf("cutShadow: batch %d, rest %d, more %v, err %v; want %d, %d, %v", len(batch), len(rest), more, err, tc.batch, tc.rest, tc.more)
			}
			if tc.batch > 0 && len(tc.pending) > 0 && batch[len(batch)-1].Sequence != uint64(len(tc.pending)-tc.rest) {
				t.Errorf("the batch ends at sequence %d", batch[len(batch)-1].Sequence)
			}
			if tc.batch > 0 && (b.first != tc.pending[len(tc.pending)-tc.rest-tc.batch] || b.last != tc.pending[len(tc.pending)-tc.rest-1]) {
				t.Errorf("the batch's first and last manifests %+v, %+v", b.first, b.last)
			}
		})
	}
	if _, _, _, err := cutShadow([]input.Msg{{Data: []byte("{"), Sequence: 7}}, false); err == nil {
		t.Error("a manifest that does not decode: no error")
	}
}
