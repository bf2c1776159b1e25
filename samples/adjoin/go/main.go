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
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"

	groupstate "github.com/groupstate/groupstate/sdk/go"
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

// pair is an emitted row: an impression and a click on it, or (ClickTS nil, written as null)
// an impression that no click matched.
type pair struct {
	AdID         json.RawMessage `json:"ad_id"`
	ImpressionTS int64           `json:"impression_ts"`
	ClickTS      *int64          `json:"click_ts"`
}

// adjoin is the processor: each side's rows wait in a list until the watermark has passed the
// last time a row of the other side could match them.
type adjoin struct {
	impressions *groupstate.ListState[impression]
	clicks      *groupstate.ListState[int64]
	within      int64 // ms
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
	a.clicks = groupstate.NewListState[int64](h, "clicks")
	return nil
}

// load reads both lists.
func (a *adjoin) load() ([]impression, []int64) {
	return slices.Collect(a.impressions.All()), slices.Collect(a.clicks.All())
}

// store writes a list back when the call changed it: the rows from its first `kept` elements
// on are appended when the ones before are unchanged (changed false: the common case of a
// data call, one op per row), else the list is written whole; an empty list is cleared, so
// a key whose rows have all been evicted holds no state.
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
	imps, clicks := a.load()
	buffered, bufferedClicks := len(imps), len(clicks) // the elements in the lists already
	marked := false                                    // one of them was matched by a click of this call
	n := 0
	for r := range rows {
		ts, err := r.ts()
		if err != nil {
			return fmt.Errorf("adjoin: row %d (%s): %w", n, r.Input(), err)
		}
		n++
		switch r.Input() {
		case impressionsInput:
			matched := false
			for _, c := range clicks {
				if ts <= c && c <= ts+a.within {
					out.Emit(pair{AdID: ad.JSON(), ImpressionTS: ts, ClickTS: &c})
					matched = true
				}
			}
			imps = append(imps, impression{TS: ts, Matched: matched})
			if err := t.Register(ts + a.within); err != nil {
				return err
			}
		case clicksInput:
			for k := range imps {
				if i := imps[k].TS; i <= ts && ts <= i+a.within {
					out.Emit(pair{AdID: ad.JSON(), ImpressionTS: i, ClickTS: &ts})
					marked = marked || (k < buffered && !imps[k].Matched)
					imps[k].Matched = true
				}
			}
			clicks = append(clicks, ts)
			if err := t.Register(ts); err != nil {
				return err
			}
		default:
			return fmt.Errorf("adjoin: row %d comes from unknown input %q", n-1, r.Input())
		}
	}
	if err := store(a.impressions, imps, buffered, marked); err != nil {
		return err
	}
	return store(a.clicks, clicks, bufferedClicks, false)
}

// HandleExpiredTimer evicts what no row can match any more, now that the watermark has passed
// timerMs: the impressions with i + within <= timerMs (one that no click matched is emitted
// with click_ts null) and the clicks with c <= timerMs (dropped).
func (a *adjoin) HandleExpiredTimer(ad groupstate.Key, timerMs int64, t *groupstate.Timers, out *groupstate.Emitter[pair]) error {
	imps, clicks := a.load()
	nImps, nClicks := len(imps), len(clicks)
	keep := imps[:0]
	for _, im := range imps {
		if im.TS+a.within > timerMs {
			keep = append(keep, im)
		} else if !im.Matched {
			out.Emit(pair{AdID: ad.JSON(), ImpressionTS: im.TS})
		}
	}
	clicks = slices.DeleteFunc(clicks, func(c int64) bool { return c <= timerMs })
	if err := store(a.impressions, keep, nImps, len(keep) != nImps); err != nil {
		return err
	}
	return store(a.clicks, clicks, nClicks, len(clicks) != nClicks)
}
