// Command adjoin is the stream-stream join sample (ABI v2, a deployment with two inputs): it
// joins ad impressions with the clicks on them, a click at c matching an impression at i of
// the same ad when i <= c <= i + within, emits each pair once, and emits an impression that no
// click matched with click_ts null once the watermark has passed i + within (a left outer
// join). See ../README.md for the rules and the scenario that pins them down in every
// language.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o adjoin.wasm .
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"

	groupstate "github.com/groupstate/groupstate/sdk/go"
	"github.com/groupstate/groupstate/sdk/go/jsonobj"
)

func init() { groupstate.Process(&adjoin{}) }

func main() {}

// The spec's inputs.
const (
	impressionsInput = "impressions"
	clicksInput      = "clicks"
)

// row is an input row of either input: {"ad_id", "ts", ...} (ts in epoch milliseconds).
type row struct {
	groupstate.InputName
	TS json.RawMessage `json:"ts"` // checked by ts: a JSON number
}

// UnmarshalJSON keeps the row's ts as it is (ts checks it) and skips the other members, as
// encoding/json decodes a row: a name matches ts whatever its case, and the last one wins.
func (r *row) UnmarshalJSON(b []byte) error {
	return jsonobj.Each(b, func(name, value []byte) error {
		if bytes.EqualFold(name, []byte("ts")) {
			r.TS = value
		}
		return nil
	})
}

// ts returns the row's ts, or an error when it is missing or not a JSON number (the runtime
// also reads RFC 3339 strings as event times, but this handler wants numbers).
func (r *row) ts() (int64, error) {
	if len(r.TS) > 0 && (r.TS[0] == '-' || r.TS[0] >= '0' && r.TS[0] <= '9') {
		if f, err := strconv.ParseFloat(string(r.TS), 64); err == nil {
			return int64(f), nil
		}
	}
	if len(r.TS) == 0 {
		return 0, errors.New("no ts")
	}
	return 0, fmt.Errorf("ts %s is not a number", r.TS)
}

// buffered is an element of the key's list: a buffered impression ({"ts": i, "matched":
// bool}, matched telling whether a click matched it) or a buffered click (its time, a JSON
// number). Both sides share one list, in arrival order, so that a call reads the key's rows
// with one state read however many sides it needs.
type buffered struct {
	Click   bool  // a click, else an impression
	TS      int64 // the row's time
	Matched bool  // an impression that a click matched
}

// pair is an emitted row: an impression and a click on it, or (ClickTS nil, written as null)
// an impression that no click matched.
type pair struct {
	AdID         json.RawMessage `json:"ad_id"`
	ImpressionTS int64           `json:"impression_ts"`
	ClickTS      *int64          `json:"click_ts"`
}

// The methods below encode and decode the list elements and the emitted rows without
// reflection (see groupstate.Typed): without them the handler works the same, at several
// times the cost per element.

// UnmarshalJSON reads an impression, {"ts": i, "matched": bool}, or a click, a number.
func (e *buffered) UnmarshalJSON(b []byte) (err error) {
	*e = buffered{}
	if len(b) > 0 && b[0] != '{' {
		e.Click = true
		e.TS, err = jsonobj.Int(b)
		return err
	}
	return jsonobj.Each(b, func(name, value []byte) (err error) {
		switch string(name) {
		case "ts":
			e.TS, err = jsonobj.Int(value)
		case "matched":
			e.Matched, err = jsonobj.Bool(value)
		}
		return err
	})
}

// AppendJSON writes an impression as {"ts": i, "matched": bool}, a click as its time.
func (e buffered) AppendJSON(dst []byte) ([]byte, error) {
	if e.Click {
		return strconv.AppendInt(dst, e.TS, 10), nil
	}
	w := jsonobj.NewWriter(dst)
	w.Int("ts", e.TS)
	w.Bool("matched", e.Matched)
	return w.End()
}

// AppendJSON writes {"ad_id": key, "impression_ts": i, "click_ts": c or null}.
func (p pair) AppendJSON(dst []byte) ([]byte, error) {
	w := jsonobj.NewWriter(dst)
	w.Raw("ad_id", p.AdID)
	w.Int("impression_ts", p.ImpressionTS)
	if p.ClickTS != nil {
		w.Int("click_ts", *p.ClickTS)
	} else {
		w.Null("click_ts")
	}
	return w.End()
}

// adjoin is the processor: each side's rows wait in the key's list until the watermark has
// passed the last time a row of the other side could match them.
type adjoin struct {
	rows   *groupstate.ListState[buffered]
	within int64 // ms

	// The calls' buffer, reused from call to call so that a call allocates little (the Go
	// runtime's garbage collector is costly under WebAssembly).
	buf []buffered
}

func (a *adjoin) Init(h *groupstate.ProcessorHandle) error {
	within, ok, err := h.Config().Duration("within")
	if err != nil {
		return err
	} else if !ok || within.Milliseconds() <= 0 {
		return errors.New("adjoin: config within must be a positive duration")
	}
	a.within = within.Milliseconds()
	if in := h.Inputs(); len(in) != 2 || !slices.Contains(in, impressionsInput) || !slices.Contains(in, clicksInput) {
		return fmt.Errorf("adjoin: the spec's inputs must be %s and %s, got %q", impressionsInput, clicksInput, in)
	}
	a.rows = groupstate.NewListState[buffered](h, "rows")
	return nil
}

// expires reports whether the watermark having passed t evicts e: an impression at i once
// i + within <= t, a click at c once c <= t.
func (a *adjoin) expires(e buffered, t int64) bool {
	if e.Click {
		return e.TS <= t
	}
	return e.TS+a.within <= t
}

// HandleInputRows joins each row, in order, with the other side's buffered rows, then
// buffers it until the watermark passes the last time it could match: an impression at i
// until i + within, a click at c until c. The list is read once, at the call's first row;
// the call appends its rows to it, and writes it whole only when a click marked a buffered
// impression matched.
func (a *adjoin) HandleInputRows(ad groupstate.Key, rows iter.Seq[row], t *groupstate.Timers, out *groupstate.Emitter[pair]) error {
	all, kept, loaded := a.buf[:0], 0, false
	defer func() { a.buf = all[:0] }()
	marked := false // a buffered impression was matched by a click of this call
	n := 0
	for r := range rows {
		ts, err := r.ts()
		if err != nil {
			return fmt.Errorf("adjoin: row %d (%s): %w", n, r.Input(), err)
		}
		n++
		if !loaded {
			all = slices.AppendSeq(all, a.rows.All())
			kept, loaded = len(all), true
		}
		switch r.Input() {
		case impressionsInput:
			matched := false
			for _, e := range all {
				if c := e.TS; e.Click && ts <= c && c <= ts+a.within {
					out.Emit(pair{AdID: ad.JSON(), ImpressionTS: ts, ClickTS: &c})
					matched = true
				}
			}
			all = append(all, buffered{TS: ts, Matched: matched})
			if err := t.Register(ts + a.within); err != nil {
				return err
			}
		case clicksInput:
			for k := range all {
				if e := &all[k]; !e.Click && e.TS <= ts && ts <= e.TS+a.within {
					out.Emit(pair{AdID: ad.JSON(), ImpressionTS: e.TS, ClickTS: &ts})
					marked = marked || (k < kept && !e.Matched)
					e.Matched = true
				}
			}
			all = append(all, buffered{Click: true, TS: ts})
			if err := t.Register(ts); err != nil {
				return err
			}
		default:
			return fmt.Errorf("adjoin: row %d comes from unknown input %q", n-1, r.Input())
		}
	}
	switch {
	case marked:
		return a.rows.Put(all)
	case len(all) > kept:
		return a.rows.AppendAll(all[kept:])
	}
	return nil
}

// HandleExpiredTimer evicts what no row can match any more, now that the watermark has passed
// timerMs: the impressions with i + within <= timerMs (one that no click matched is emitted
// with click_ts null) and the clicks with c <= timerMs (dropped). When what it evicts is the
// list's front (rows of an ad mostly come in time order), the list drops it (one op) instead
// of being written again.
func (a *adjoin) HandleExpiredTimer(ad groupstate.Key, timerMs int64, t *groupstate.Timers, out *groupstate.Emitter[pair]) error {
	all := slices.AppendSeq(a.buf[:0], a.rows.All())
	defer func() { a.buf = all[:0] }()
	for _, e := range all {
		if !e.Click && !e.Matched && a.expires(e, timerMs) {
			out.Emit(pair{AdID: ad.JSON(), ImpressionTS: e.TS})
		}
	}
	return evict(a.rows, all, func(e buffered) bool { return a.expires(e, timerMs) })
}

// evict removes the elements of list l (all, as read) for which gone is true: nothing when
// there are none, a clear when all go, a drop of the front when they are its first
// elements, and else the list is written again with the others.
func evict[T any](l *groupstate.ListState[T], all []T, gone func(T) bool) error {
	front := 0
	for front < len(all) && gone(all[front]) {
		front++
	}
	if slices.ContainsFunc(all[front:], gone) {
		return l.Put(slices.DeleteFunc(all, gone))
	}
	switch front {
	case 0:
	case len(all):
		l.Clear()
	default:
		return l.DropFirst(front)
	}
	return nil
}
