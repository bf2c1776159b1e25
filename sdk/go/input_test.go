package groupstate

import (
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/abi"
)

// sideRow is a row type that embeds InputName.
type sideRow struct {
	InputName
	TS int64 `json:"ts"`
}

// rawSideRow keeps the row's JSON text and embeds InputName (a json.Unmarshaler row type).
type rawSideRow struct {
	InputName
	JSON json.RawMessage
}

func (r *rawSideRow) UnmarshalJSON(b []byte) error {
	r.JSON = append(r.JSON[:0], b...)
	return nil
}

// sideProc emits "input:ts" for each row of a value row type R.
func sideProc[R interface{ Input() string }](text func(R) string) *funcProc[R, string] {
	return &funcProc[R, string]{rows: func(key Key, rows iter.Seq[R], t *Timers, out *Emitter[string]) error {
		for r := range rows {
			out.Emit(r.Input() + ":" + text(r))
		}
		return nil
	}}
}

// TestInputNames: a row type that embeds InputName (R itself, a pointer to it, one with its
// own UnmarshalJSON) gets each row's input name under HAS_INPUTS, and "" without.
func TestInputNames(t *testing.T) {
	rows := []any{1, `{"ts":5}`, 0, `{"ts":3}`, 1, `{"ts":7}`}
	for _, tc := range []struct {
		name string
		p    func() *Module
	}{
		{"value", func() *Module {
			m := NewModule()
			RegisterProcessor(m, sideProc(func(r sideRow) string { return fmt.Sprint(r.TS) }))
			return m
		}},
		{"pointer", func() *Module {
			m := NewModule()
			RegisterProcessor(m, sideProc(func(r *sideRow) string { return fmt.Sprint(r.TS) }))
			return m
		}},
		{"unmarshaler", func() *Module {
			m := NewModule()
			RegisterProcessor(m, sideProc(func(r rawSideRow) string {
				return strings.TrimPrefix(strings.TrimSuffix(string(r.JSON), "}"), `{"ts":`)
			}))
			return m
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.p()
			h := newTestHostInit(t, m, abi.TimeoutEventTime, initBufInputs(abi.TimeoutEventTime, "{}", "impressions", "clicks"))
			res := h.process(m, newV2Buf(1000, 0, 2).dataInputs(`"a"`, rows...).dataInputs(`"b"`, 0, `{"ts":1}`).b)
			requireOK(t, res)
			if got := fmt.Sprint(res[0].emits, res[1].emits); got != `["clicks:5" "impressions:3" "clicks:7"] ["impressions:1"]` {
				t.Fatalf("emits %s", got)
			}

			// Without HAS_INPUTS every row's input is "".
			m = tc.p()
			h = newTestHost(t, m, abi.TimeoutEventTime)
			res = h.process(m, newV2Buf(1000, 0, 1).data(`"a"`, `{"ts":5}`, `{"ts":3}`).b)
			requireOK(t, res)
			if got := fmt.Sprint(res[0].emits); got != `[":5" ":3"]` {
				t.Fatalf("emits without inputs %s", got)
			}
		})
	}
}

// TestInputNameNullRow: a null row of a pointer row type stays nil (no input name is set on
// it, and nothing panics).
func TestInputNameNullRow(t *testing.T) {
	m := NewModule()
	RegisterProcessor(m, &funcProc[*sideRow, string]{rows: func(key Key, rows iter.Seq[*sideRow], t *Timers, out *Emitter[string]) error {
		for r := range rows {
			if r == nil {
				out.Emit("nil")
			} else {
				out.Emit(r.Input())
			}
		}
		return nil
	}})
	h := newTestHostInit(t, m, abi.TimeoutNone, initBufInputs(abi.TimeoutNone, "{}", "a", "b"))
	res := h.process(m, newV2Buf(1000, 0, 1).dataInputs(`"k"`, 1, `null`, 0, `{}`).b)
	requireOK(t, res)
	if got := fmt.Sprint(res[0].emits); got != `["nil" "a"]` {
		t.Fatalf("emits %s", got)
	}
}

// TestProcessorHandleInputs: Inputs lists the init's input names (a copy), nil without
// HAS_INPUTS, and a processor can refuse its init on them.
func TestProcessorHandleInputs(t *testing.T) {
	var got []string
	m := NewModule()
	RegisterProcessor(m, &rawProc{init: func(h *ProcessorHandle) error {
		got = h.Inputs()
		if len(got) > 0 {
			got[0] = "changed" // a copy: the next Inputs is unchanged
			got = h.Inputs()
		}
		if slices.Contains(got, "bad") {
			return fmt.Errorf("adjoin: unexpected input %q", "bad")
		}
		return nil
	}})
	for _, tc := range []struct {
		init []byte
		want []string
		err  string
	}{
		{initBufInputs(abi.TimeoutNone, "{}", "impressions", "clicks"), []string{"impressions", "clicks"}, ""},
		{initBufV2(abi.TimeoutNone, "{}"), nil, ""},
		{initBufInputs(abi.TimeoutNone, "{}", "a", "bad"), []string{"a", "bad"}, `adjoin: unexpected input "bad"`},
	} {
		st, msg, _, err := abi.ParseInitResultV2(m.Init(tc.init))
		if err != nil || (st == abi.StatusOK) != (tc.err == "") || string(msg) != tc.err {
			t.Fatalf("init: %d %q %v, want %q", st, msg, err, tc.err)
		}
		if !slices.Equal(got, tc.want) || (tc.want == nil) != (got == nil) {
			t.Fatalf("Inputs %q, want %q", got, tc.want)
		}
	}
}

// TestInitFlags: a processor's module refuses init flags it does not implement (abi/README.md
// 9.1); a v1 module ignores reserved bits as before.
func TestInitFlags(t *testing.T) {
	buf := func(v uint32, flags uint32) []byte {
		return abi.AppendInit(nil, abi.Init{ABIVersion: v, Flags: flags, Name: []byte("t"), Config: []byte("{}")})
	}
	m := NewModule()
	RegisterProcessor(m, &rawProc{})
	for _, tc := range []struct {
		flags uint32
		err   string
	}{
		{0, ""},
		{abi.InitHasWatermark, ""},
		{4, "groupstate: host sets init flags 0x4 this SDK does not implement (rebuild with a newer SDK)"},
		{abi.InitHasWatermark | 0x80000000, "init flags 0x80000000 this SDK"},
	} {
		st, msg, _, err := abi.ParseInitResultV2(m.Init(buf(abi.Version2, tc.flags)))
		if err != nil || (st == abi.StatusOK) != (tc.err == "") || !strings.Contains(string(msg), tc.err) {
			t.Fatalf("flags %#x: %d %q %v, want %q", tc.flags, st, msg, err, tc.err)
		}
	}
	v1 := newTestModule(t, abi.TimeoutNone, 0, "{}", func(g *RawGroup) error { return nil })
	requireInitOK(t, v1.Init(buf(abi.Version, 4|abi.InitHasWatermark)))
}

// TestInputIndexOutOfRange: a row whose input index is not below the init's input count is a
// malformed buffer, a whole-call error.
func TestInputIndexOutOfRange(t *testing.T) {
	m := NewModule()
	RegisterProcessor(m, &rawProc{rows: func(Key, iter.Seq[json.RawMessage], *Timers, *Emitter[string]) error { return nil }})
	newTestHostInit(t, m, abi.TimeoutNone, initBufInputs(abi.TimeoutNone, "{}", "a", "b"))
	msg := callError(t, m.Process(newV2Buf(1000, 0, 1).dataInputs(`"k"`, 0, `{}`, 2, `{}`).b))
	requireErrContains(t, msg, "group 0: row 1: input index 2, the init has 2 inputs")
}
