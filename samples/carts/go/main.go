// Command carts is the transformWithState sample (ABI v2): a shopping cart per user, with a
// map of items, a list of recent events that expire by TTL, an abandon timer that every
// activity moves and one reminder per cart. See ../README.md for the rules and the scenario
// that pins them down in every language.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o carts.wasm .
package main

import (
	"encoding/json"
	"fmt"
	"iter"
	"time"

	groupstate "github.com/groupstate/groupstate/sdk/go"
)

func init() { groupstate.Process(&carts{}) }

func main() {}

// event is an input row.
type event struct {
	Event string  `json:"event"` // "add", "remove" or "checkout"
	Item  string  `json:"item"`
	Qty   int64   `json:"qty"`
	Price float64 `json:"price"`
}

// line is an item of the cart.
type line struct {
	Qty   int64   `json:"qty"`
	Price float64 `json:"price"`
}

// output is an emitted row: a checkout, an abandoned cart or a reminder.
type output struct {
	UserID json.RawMessage `json:"user_id"`
	Event  string          `json:"event"`
	Items  int             `json:"items"`
	Total  float64         `json:"total"`
	Events *int            `json:"events,omitempty"` // not in a reminder
}

// carts is the processor: its variables, and the durations of the spec's config.
type carts struct {
	items     *groupstate.MapState[line]
	history   *groupstate.ListState[string]
	abandonAt *groupstate.ValueState[int64]
	remindAt  *groupstate.ValueState[int64]

	abandonAfter, remindAfter time.Duration
}

func (c *carts) Init(h *groupstate.ProcessorHandle) error {
	var err error
	durations := []struct {
		field string
		d     *time.Duration
	}{{"abandon_after", &c.abandonAfter}, {"remind_after", &c.remindAfter}}
	for _, f := range durations {
		var ok bool
		if *f.d, ok, err = h.Config().Duration(f.field); err != nil {
			return err
		} else if !ok || *f.d <= 0 {
			return fmt.Errorf("carts: config %s must be a positive duration", f.field)
		}
	}
	ttl, ok, err := h.Config().Duration("history_ttl")
	if err != nil {
		return err
	} else if !ok || ttl <= 0 {
		return fmt.Errorf("carts: config history_ttl must be a positive duration")
	}
	c.items = groupstate.NewMapState[line](h, "items")
	c.history = groupstate.NewListState[string](h, "history", groupstate.WithTTL(ttl))
	c.abandonAt = groupstate.NewValueState[int64](h, "abandon_at")
	c.remindAt = groupstate.NewValueState[int64](h, "remind_at")
	return nil
}

// HandleInputRows applies the rows in arrival order, then moves the abandon timer and sets
// the reminder of a cart that has items.
func (c *carts) HandleInputRows(user groupstate.Key, rows iter.Seq[event], t *groupstate.Timers, out *groupstate.Emitter[output]) error {
	for e := range rows {
		if err := c.history.Append(e.Event); err != nil {
			return err
		}
		switch e.Event {
		case "add":
			l, _ := c.items.GetOption(e.Item)
			l.Qty += e.Qty
			l.Price = e.Price
			if err := c.items.Update(e.Item, l); err != nil {
				return err
			}
		case "remove":
			l, ok := c.items.GetOption(e.Item)
			if !ok {
				continue
			}
			if l.Qty -= e.Qty; l.Qty <= 0 {
				c.items.Remove(e.Item)
			} else if err := c.items.Update(e.Item, l); err != nil {
				return err
			}
		case "checkout":
			o := c.summary(user, "checkout", true)
			out.Emit(o)
			if err := c.clear(t); err != nil {
				return err
			}
		default:
			return fmt.Errorf("carts: unknown event %q", e.Event)
		}
	}
	if !c.items.Exists() {
		return nil // an empty cart keeps the timers it has
	}
	now := t.CurrentProcessingTimeMs()
	if old, ok := c.abandonAt.GetOption(); ok {
		if err := t.Delete(old); err != nil {
			return err
		}
	}
	at := now + c.abandonAfter.Milliseconds()
	if err := t.Register(at); err != nil {
		return err
	}
	if err := c.abandonAt.Update(at); err != nil {
		return err
	}
	if c.remindAt.Exists() {
		return nil // one reminder per cart: later activity does not move it
	}
	at = now + c.remindAfter.Milliseconds()
	if err := t.Register(at); err != nil {
		return err
	}
	return c.remindAt.Update(at)
}

// HandleExpiredTimer abandons the cart (its abandon timer) or reminds the user (its
// reminder, after which remind_at stays set: one reminder per cart).
func (c *carts) HandleExpiredTimer(user groupstate.Key, timerMs int64, t *groupstate.Timers, out *groupstate.Emitter[output]) error {
	if at, ok := c.abandonAt.GetOption(); ok && at == timerMs {
		out.Emit(c.summary(user, "abandoned", true))
		return c.clear(t)
	}
	if at, ok := c.remindAt.GetOption(); ok && at == timerMs {
		out.Emit(c.summary(user, "reminder", false))
	}
	return nil
}

// summary is the cart's output row: its distinct items and total, and with events the
// number of its live history entries.
func (c *carts) summary(user groupstate.Key, what string, events bool) output {
	o := output{UserID: user.JSON(), Event: what}
	for _, l := range c.items.All() {
		o.Items++
		o.Total += float64(l.Qty) * l.Price
	}
	if events {
		n := 0
		for range c.history.All() {
			n++
		}
		o.Events = &n
	}
	return o
}

// clear empties every variable and deletes every timer.
func (c *carts) clear(t *groupstate.Timers) error {
	c.items.Clear()
	c.history.Clear()
	c.abandonAt.Clear()
	c.remindAt.Clear()
	for _, ts := range t.List() {
		if err := t.Delete(ts); err != nil {
			return err
		}
	}
	return nil
}
