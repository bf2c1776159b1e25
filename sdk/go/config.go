package groupstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/groupstate/groupstate/abi"
)

// Config is what the host tells a module once per instance: the deployment's name, timeout
// mode and the free-form config object of its spec, as JSON. A Config stays valid for the
// life of the instance.
type Config struct {
	name         string
	mode         abi.TimeoutMode
	hasWatermark bool
	json         []byte
	fields       map[string]json.RawMessage
	inputs       []string // the input names of an init with abi.InitHasInputs, else nil
}

// newConfig builds the Config of an init buffer, copying what it keeps.
func newConfig(in abi.Init) (Config, error) {
	c := Config{
		name:         string(in.Name),
		mode:         in.Mode,
		hasWatermark: in.Flags&abi.InitHasWatermark != 0,
		json:         append([]byte(nil), in.Config...),
	}
	for _, n := range in.Inputs {
		c.inputs = append(c.inputs, string(n))
	}
	if len(c.json) == 0 {
		c.json = []byte("{}")
	}
	if err := json.Unmarshal(c.json, &c.fields); err != nil {
		return Config{}, fmt.Errorf("groupstate: config is not a JSON object: %w", err)
	}
	return c, nil
}

// Name returns the deployment's name.
func (c Config) Name() string { return c.name }

// Mode returns the deployment's timeout mode.
func (c Config) Mode() abi.TimeoutMode { return c.mode }

// HasWatermark reports whether the deployment configures an event-time watermark, so that
// CurrentWatermarkMs is defined.
func (c Config) HasWatermark() bool { return c.hasWatermark }

// JSON returns the deployment's config object as JSON ("{}" when the spec has none). The
// bytes must not be modified.
func (c Config) JSON() []byte { return c.json }

// Decode decodes the config object into v, like [json.Unmarshal].
func (c Config) Decode(v any) error { return json.Unmarshal(c.json, v) }

// Duration returns the config field named field as a duration. The field may hold a Go
// duration string ("10s", "1m30s") or a JSON number of milliseconds. It returns false (and no
// error) when the field is absent or null, and an error when it holds anything else.
func (c Config) Duration(field string) (time.Duration, bool, error) {
	raw, ok := c.fields[field]
	if !ok || string(raw) == "null" {
		return 0, false, nil
	}
	d, err := parseDuration(raw)
	if err != nil {
		return 0, false, fmt.Errorf("groupstate: config %s: %w", field, err)
	}
	return d, true, nil
}

// parseDuration parses a JSON duration string or a JSON number of milliseconds.
func parseDuration(raw json.RawMessage) (time.Duration, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		return time.ParseDuration(s)
	}
	ms, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, errors.New("want a duration string such as \"10s\" or a number of milliseconds, got " + string(raw))
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}
