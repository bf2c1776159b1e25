package groupstate_test

import (
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/groupstate/groupstate/abi"
	groupstate "github.com/groupstate/groupstate/sdk/go"
)

// click is an input row.
type click struct {
	Page string `json:"page"`
}

// pageViews is a transformWithState processor: per user it counts clicks, keeps each page's
// count for a day, remembers the last ten pages, and emits a summary when the user has been
// idle for 30 minutes.
type pageViews struct {
	total  *groupstate.ValueState[int]
	pages  *groupstate.MapState[int]
	recent *groupstate.ListState[string]
}

type summary struct {
	User  json.RawMessage `json:"user"`
	Total int             `json:"total"`
	Pages map[string]int  `json:"pages"`
}

func (p *pageViews) Init(h *groupstate.ProcessorHandle) error {
	p.total = groupstate.NewValueState[int](h, "total")
	p.pages = groupstate.NewMapState[int](h, "pages", groupstate.WithTTL(24*time.Hour))
	p.recent = groupstate.NewListState[string](h, "recent")
	return nil
}

func (p *pageViews) HandleInputRows(user groupstate.Key, rows iter.Seq[click], t *groupstate.Timers, out *groupstate.Emitter[summary]) error {
	total, _ := p.total.GetOption()
	for c := range rows {
		total++
		n, _ := p.pages.GetOption(c.Page)
		if err := p.pages.Update(c.Page, n+1); err != nil {
			return err
		}
		if err := p.recent.Append(c.Page); err != nil {
			return err
		}
	}
	// Keep the last ten pages: read the list (lazily, a page of it at a time) and put it back.
	var recent []string
	for page := range p.recent.All() {
		recent = append(recent, page)
	}
	if len(recent) > 10 {
		if err := p.recent.Put(recent[len(recent)-10:]); err != nil {
			return err
		}
	}
	// One idle timer per user: replace the previous one.
	for _, ts := range t.List() {
		if err := t.Delete(ts); err != nil {
			return err
		}
	}
	if err := t.Register(t.CurrentProcessingTimeMs() + (30 * time.Minute).Milliseconds()); err != nil {
		return err
	}
	return p.total.Update(total)
}

func (p *pageViews) HandleExpiredTimer(user groupstate.Key, timerMs int64, t *groupstate.Timers, out *groupstate.Emitter[summary]) error {
	s := summary{User: user.JSON(), Pages: map[string]int{}}
	s.Total, _ = p.total.GetOption()
	for page, n := range p.pages.All() {
		s.Pages[page] = n
	}
	out.Emit(s)
	p.recent.Clear()
	return nil
}

// ExampleProcess shows a transformWithState processor. In a handler module, package main
// registers it from an init function with groupstate.Process(&pageViews{}); here it is
// registered on a Module of its own, whose init result declares the variables. (Running its
// calls natively needs a host for the state requests: see Module.SetStateHost.)
func ExampleProcess() {
	m := groupstate.NewModule()
	groupstate.RegisterProcessor(m, &pageViews{})
	fmt.Println("ABI version", m.ABIVersion())

	res := m.Init(abi.AppendInit(nil, abi.Init{ABIVersion: abi.Version2, Mode: abi.TimeoutProcessingTime,
		Name: []byte("pageviews"), Config: []byte("{}")}))
	_, _, decls, _ := abi.ParseInitResultV2(res)
	for i, d := range decls {
		fmt.Printf("variable %d: %s %s ttl=%dms\n", i, d.Kind, d.Name, d.TTLMs)
	}
	// Output:
	// ABI version 2
	// variable 0: value total ttl=0ms
	// variable 1: map pages ttl=86400000ms
	// variable 2: list recent ttl=0ms
}

// sideRow is a row of a deployment with several inputs: embedding groupstate.InputName gives
// it the name of its input.
type sideRow struct {
	groupstate.InputName
	TS int64 `json:"ts"`
}

// sides checks its inputs at Init and tells each row's input. It keeps no state.
type sides struct{}

func (sides) Init(h *groupstate.ProcessorHandle) error {
	if in := h.Inputs(); !slices.Equal(in, []string{"impressions", "clicks"}) {
		return fmt.Errorf("sides: want the inputs impressions and clicks, got %q", in)
	}
	return nil
}

// side is an emitted row.
type side struct {
	Ad    json.RawMessage `json:"ad"`
	Input string          `json:"input"`
	TS    int64           `json:"ts"`
}

func (sides) HandleInputRows(key groupstate.Key, rows iter.Seq[sideRow], t *groupstate.Timers, out *groupstate.Emitter[side]) error {
	for r := range rows {
		out.Emit(side{Ad: key.JSON(), Input: r.Input(), TS: r.TS})
	}
	return nil
}

func (sides) HandleExpiredTimer(groupstate.Key, int64, *groupstate.Timers, *groupstate.Emitter[side]) error {
	return nil
}

// ExampleInputName runs a processor over a deployment with two inputs (the spec's inputs
// list): the init names them, and each row of a key, whatever its input, reaches the same
// call, with its input's name.
func ExampleInputName() {
	m := groupstate.NewModule()
	groupstate.RegisterProcessor(m, sides{})
	init := abi.Init{ABIVersion: abi.Version2, Mode: abi.TimeoutEventTime, Flags: abi.InitHasWatermark | abi.InitHasInputs,
		Name: []byte("adjoin"), Config: []byte("{}"), Inputs: [][]byte{[]byte("impressions"), []byte("clicks")}}
	st, _, _, _ := abi.ParseInitResultV2(m.Init(abi.AppendInit(nil, init)))
	fmt.Println("init status", st)

	// Input 1 is clicks, input 0 impressions.
	b := abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: 1, ProcessingTimeMs: 1000})
	b = abi.AppendDataGroupInputs(b, []byte(`"ad1"`), [][]byte{[]byte(`{"ts":5}`), []byte(`{"ts":3}`)}, []uint32{1, 0})
	rr, _ := abi.NewResultReaderV2(m.Process(b))
	var g abi.GroupResultV2
	for ok, _ := rr.Next(&g); ok; ok, _ = rr.Next(&g) {
		for e := range g.Emits() {
			fmt.Println(string(e))
		}
	}

	init.Inputs = [][]byte{[]byte("views")}
	st, msg, _, _ := abi.ParseInitResultV2(m.Init(abi.AppendInit(nil, init)))
	fmt.Println("init status", st, string(msg))
	// Output:
	// init status 0
	// {"ad":"ad1","input":"clicks","ts":5}
	// {"ad":"ad1","input":"impressions","ts":3}
	// init status 1 sides: want the inputs impressions and clicks, got ["views"]
}
