package groupstate

import (
	"testing"
	"time"

	"github.com/groupstate/groupstate/abi"
)

// TestConfigDuration covers the forms a duration field may take.
func TestConfigDuration(t *testing.T) {
	tests := []struct {
		config string
		want   time.Duration
		ok     bool
		err    bool
	}{
		{`{"d":"10s"}`, 10 * time.Second, true, false},
		{`{"d":"1m30s"}`, 90 * time.Second, true, false},
		{`{"d":"250ms"}`, 250 * time.Millisecond, true, false},
		{`{"d":1500}`, 1500 * time.Millisecond, true, false},
		{`{"d":1.5}`, 1500 * time.Microsecond, true, false},
		{`{"d":0}`, 0, true, false},
		{`{}`, 0, false, false},
		{`{"d":null}`, 0, false, false},
		{`{"d":"ten"}`, 0, false, true},
		{`{"d":"10"}`, 0, false, true},
		{`{"d":true}`, 0, false, true},
		{`{"d":{"s":1}}`, 0, false, true},
	}
	for _, tc := range tests {
		var c Config
		m := newTestModule(t, abi.TimeoutNone, 0, tc.config, func(*RawGroup) error { return nil })
		c = m.Config()
		d, ok, err := c.Duration("d")
		if d != tc.want || ok != tc.ok || (err != nil) != tc.err {
			t.Errorf("%s: got %v, %v, %v", tc.config, d, ok, err)
		}
	}
}

// TestConfig covers the other accessors.
func TestConfig(t *testing.T) {
	m := NewModule()
	m.HandleRaw(func(*RawGroup) error { return nil })
	var got Config
	m.OnInit(func(c Config) error { got = c; return nil })
	buf := initBuf(abi.TimeoutEventTime, abi.InitHasWatermark, `{"gap":"5s","threshold":3}`)
	requireInitOK(t, m.Init(buf))
	clear(buf) // the config must not alias the init buffer
	var v struct{ Threshold int }
	if err := got.Decode(&v); err != nil || v.Threshold != 3 {
		t.Fatalf("Decode: %v %v", v, err)
	}
	if got.Name() != "test" || got.Mode() != abi.TimeoutEventTime || !got.HasWatermark() ||
		string(got.JSON()) != `{"gap":"5s","threshold":3}` {
		t.Fatalf("config %+v", got)
	}
}
