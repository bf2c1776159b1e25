package groupstate

import (
	"bytes"
	"encoding/json"
)

// Key is the grouping key of a call: the value of the deployment's key field, which is a JSON
// string or number. It aliases the host's input buffer and is valid only during the call; the
// string [Key.String] returns stays valid.
type Key struct {
	raw []byte
}

// JSON returns the key as the canonical JSON scalar the host sent, for example "alice" (with
// the quotes) or 42. Use it, for example as a [json.RawMessage], to emit the key with its
// original JSON type. The bytes are valid only during the call and must not be modified.
func (k Key) JSON() []byte { return k.raw }

// String returns the key as text: the decoded string for a JSON string key, the number's
// JSON text for a number key.
func (k Key) String() string {
	b := k.raw
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		if bytes.IndexByte(b, '\\') < 0 {
			return string(b[1 : len(b)-1])
		}
		var s string
		if err := json.Unmarshal(b, &s); err == nil {
			return s
		}
	}
	return string(b)
}

// IsString reports whether the key is a JSON string (rather than a number).
func (k Key) IsString() bool { return len(k.raw) > 0 && k.raw[0] == '"' }
