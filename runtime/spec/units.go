package spec

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/groupstate/groupstate/timeouts"
)

// Duration is a time.Duration written as a Go duration string ("10s", "1m30s") in YAML and
// JSON.
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := timeouts.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %v", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := timeouts.ParseDuration(s)
	*d = Duration(v)
	return err
}

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// ByteSize is a size in bytes written as a number or with a unit: "64MiB", "512KiB", "1GB".
type ByteSize uint64

// String formats b with the largest binary unit that divides it ("64MiB"), else in bytes.
func (b ByteSize) String() string {
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b > 0 && uint64(b)%u.mult == 0 {
			return strconv.FormatUint(uint64(b)/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatUint(uint64(b), 10) + "B"
}

// ParseByteSize parses sizes such as "1048576", "512KiB", "64MiB", "1GiB", "10MB".
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000_000}, {"GB", 1000_000_000}, {"B", 1}}
	mult := uint64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || n > (1<<63)/mult {
		return 0, fmt.Errorf("%q is not a size (want a number of bytes, or a number with KiB, MiB, GiB, KB, MB or GB)", s)
	}
	return ByteSize(n * mult), nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %v", n.Line, err)
	}
	*b = v
	return nil
}
