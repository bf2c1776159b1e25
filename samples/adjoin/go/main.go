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

// impression is an element of the impressions list: an impression's time, and whether a
// click matched it.
type impression struct {
	TS      int64 `json:"ts"`
	Matched bool  `json:"matched"`
}

// click is an element of the clicks list: a click's time.
type click int64

// pair is an emitted row: an impression and a click on it, or (ClickTS nil, written as null)
// an impression that no click matched.
type pair struct {
	AdID         json.RawMessage `json:"ad_id"`
	ImpressionTS int64           `json:"impression_ts"`
	ClickTS      *int64          `json:"click_ts"`
}

// The methods below encode and decode the list elements and the emitted rows without
// reflection (see groupstate.Typed), writing what encoding/json would: without them the
// handler works the same, at several times the cost per element.

// UnmarshalJSON reads {"ts": i, "matched": bool}.
func (im *impression) UnmarshalJSON(b []byte) error {
	return jsonobj.Each(b, func(name, value []byte) (err error) {
		switch string(name) {
		case "ts":
			im.TS, err = jsonobj.Int(value)
		case "matched":
			im.Matched, err = jsonobj.Bool(value)
		}
		return err
	})
}

// AppendJSON writes {"ts": i, "matched": bool}.
func (im impression) AppendJSON(dst []byte) ([]byte, error) {
	w := jsonobj.NewWriter(dst)
	w.Int("ts", im.TS)
	w.Bool("matched", im.Matched)
	return w.End()
}

// UnmarshalJSON reads a number.
func (c *click) UnmarshalJSON(b []byte) (err error) {
	v, err := jsonobj.Int(b)
	*c = click(v)
	return err
}

// AppendJSON writes the number.
func (c click) AppendJSON(dst []byte) ([]byte, error) {
	return strconv.AppendInt(dst, int64(c), 10), nil
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

// adjoin is the processor: each side's rows wait in a list until the watermark has passed the
// last time a row of the other side could match them.
type adjoin struct {
	impressions *groupstate.ListState[impression]
	clicks      *groupstate.ListState[click]
	within      int64 // ms

	// The calls' buffers, reused from call to call so that a call allocates little (the Go
	// runtime's garbage collector is costly under WebAssembly).
	impBuf   buffer[impression]
	clickBuf buffer[click]
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
	a.impressions = groupstate.NewListState[impression](h, "impressions")
	a.clicks = groupstate.NewListState[click](h, "clicks")
	return nil
}

// buffer is one side's list during a call: the elements read from the state (when the call
// needed them) followed by the ones the call added. A data call reads a list only once a row
// of the other side needs it, so a call whose rows are all of one side reads one list.
type buffer[T any] struct {
	all    []T  // the elements read, then those added
	loaded bool // the list was read: all starts with its elements
	kept   int  // how many of all's elements were read
	added  []T  // scratch for load
}

// reset empties b for a call, keeping its arrays.
func (b *buffer[T]) reset() {
	b.all, b.loaded, b.kept = b.all[:0], false, 0
}

// load reads the list into b if the call has not yet, ahead of what the call added.
func (b *buffer[T]) load(l *groupstate.ListState[T]) {
	if b.loaded {
		return
	}
	b.added = append(b.added[:0], b.all...)
	b.all = slices.AppendSeq(b.all[:0], l.All())
	b.kept, b.loaded = len(b.all), true
	b.all = append(b.all, b.added...)
}

// store writes a list back when the call changed it: the rows from its first `kept` elements
// on are appended when the ones before are unchanged (changed false: the common case of a
// data call, one op per row), else the list is written whole; an empty list is cleared, so
// a key whose rows have all been evicted holds no state. A list the call did not read has
// kept 0 and changed false: what the call added is appended.
func store[T any](l *groupstate.ListState[T], all []T, kept int, changed bool) error {
	switch {
	case len(all) == 0:
		if kept > 0 || changed {
			l.Clear()
		}
		return nil
	case changed:
		return l.Put(all)
	case len(all) > kept:
		return l.AppendAll(all[kept:])
	}
	return nil
}

// HandleInputRows joins each row, in order, with the other side's buffered rows, then
// buffers it until the watermark passes the last time it could match: an impression at i
// until i + within, a click at c until c.
func (a *adjoin) HandleInputRows(ad groupstate.Key, rows iter.Seq[row], t *groupstate.Timers, out *groupstate.Emitter[pair]) error {
	imps, clicks := &a.impBuf, &a.clickBuf
	imps.reset()
	clicks.reset()
	marked := false // a buffered impression was matched by a click of this call
	n := 0
	for r := range rows {
		ts, err := r.ts()
		if err != nil {
			return fmt.Errorf("adjoin: row %d (%s): %w", n, r.Input(), err)
		}
		n++
		switch r.Input() {
		case impressionsInput:
			clicks.load(a.clicks)
			matched := false
			for _, c := range clicks.all {
				if c := int64(c); ts <= c && c <= ts+a.within {
					out.Emit(pair{AdID: ad.JSON(), ImpressionTS: ts, ClickTS: &c})
					matched = true
				}
			}
			imps.all = append(imps.all, impression{TS: ts, Matched: matched})
			if err := t.Register(ts + a.within); err != nil {
				return err
			}
		case clicksInput:
			imps.load(a.impressions)
			for k := range imps.all {
				if i := imps.all[k].TS; i <= ts && ts <= i+a.within {
					out.Emit(pair{AdID: ad.JSON(), ImpressionTS: i, ClickTS: &ts})
					marked = marked || (k < imps.kept && !imps.all[k].Matched)
					imps.all[k].Matched = true
				}
			}
			clicks.all = append(clicks.all, click(ts))
			if err := t.Register(ts); err != nil {
				return err
			}
		default:
			return fmt.Errorf("adjoin: row %d comes from unknown input %q", n-1, r.Input())
		}
	}
	if err := store(a.impressions, imps.all, imps.kept, marked); err != nil {
		return err
	}
	return store(a.clicks, clicks.all, clicks.kept, false)
}

// HandleExpiredTimer evicts what no row can match any more, now that the watermark has passed
// timerMs: the impressions with i + within <= timerMs (one that no click matched is emitted
// with click_ts null) and the clicks with c <= timerMs (dropped). When what a list evicts is
// its front (rows of an ad mostly come in time order), the list drops it (one op) instead of
// being written again.
func (a *adjoin) HandleExpiredTimer(ad groupstate.Key, timerMs int64, t *groupstate.Timers, out *groupstate.Emitter[pair]) error {
	a.impBuf.reset()
	a.clickBuf.reset()
	a.impBuf.load(a.impressions)
	a.clickBuf.load(a.clicks)
	imps, clicks := a.impBuf.all, a.clickBuf.all
	for _, im := range imps {
		if im.TS+a.within <= timerMs && !im.Matched {
			out.Emit(pair{AdID: ad.JSON(), ImpressionTS: im.TS})
		}
	}
	if err := evict(a.impressions, imps, func(im impression) bool { return im.TS+a.within <= timerMs }); err != nil {
		return err
	}
	return evict(a.clicks, clicks, func(c click) bool { return int64(c) <= timerMs })
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
