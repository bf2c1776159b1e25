package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// marshal is what the SDK writes for a type without AppendJSON: encoding/json, HTML left alone.
func marshal(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte{'\n'}))
}

// TestCodecsWriteWhatEncodingJSONWrites: the list elements and emitted rows encode to the bytes
// encoding/json gives the same fields, and decode back.
func TestCodecsWriteWhatEncodingJSONWrites(t *testing.T) {
	c := int64(-36000000)
	for _, v := range []any{
		impression{TS: 36000000, Matched: true},
		impression{TS: -1},
		click(0),
		click(-9007199254740993),
		pair{AdID: json.RawMessage(`"a<&>1"`), ImpressionTS: 36000000, ClickTS: &c},
		pair{AdID: json.RawMessage(`7`), ImpressionTS: 1},
	} {
		var got []byte
		var err error
		switch v := v.(type) {
		case impression:
			got, err = v.AppendJSON(nil)
			var back impression
			if err == nil {
				err = back.UnmarshalJSON(got)
			}
			if back != v {
				t.Errorf("%+v decoded back as %+v", v, back)
			}
		case click:
			got, err = v.AppendJSON(nil)
			var back click
			if err == nil {
				err = back.UnmarshalJSON(got)
			}
			if back != v {
				t.Errorf("%d decoded back as %d", v, back)
			}
		case pair:
			got, err = v.AppendJSON(nil)
		}
		// encoding/json of the fields as they were declared before the codecs.
		var want string
		switch v := v.(type) {
		case impression:
			type plain impression
			want = marshal(t, plain(v))
		case click:
			want = marshal(t, int64(v))
		case pair:
			type plain pair
			want = marshal(t, plain(v))
		}
		if err != nil || string(got) != want {
			t.Errorf("%+v: AppendJSON %s, %v; encoding/json %s", v, got, err, want)
		}
	}
}

// TestRowDecodesAsEncodingJSON: a row's ts is what encoding/json would have put in the field
// (as raw JSON), whatever the member's case, duplicates and the other members.
func TestRowDecodesAsEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"ad_id":"a1","ts":36000000}`,
		`{"ad_id":"a1","ts":"1970-01-01T12:00:00Z"}`,
		`{"ad_id":"a1"}`,
		`{"ad_id":"a1","ts":null}`,
		`{"TS":1,"ad_id":{"x":[1,2]}}`,
		`{"ts":1,"Ts":2.5}`,
		`{"t\u0073":3}`,
		` { "ts" : -4e3 } `,
		`{}`,
	} {
		type plain struct {
			TS json.RawMessage `json:"ts"`
		}
		var want plain
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		var got row
		if err := got.UnmarshalJSON([]byte(in)); err != nil {
			t.Errorf("%s: %v", in, err)
		} else if !bytes.Equal(got.TS, want.TS) {
			t.Errorf("%s: ts %s, encoding/json %s", in, got.TS, want.TS)
		}
	}
	for _, in := range []string{`{"ts":}`, `{"ts":1`, `[1]`} {
		var got row
		if err := got.UnmarshalJSON([]byte(in)); err == nil {
			t.Errorf("%s decoded", in)
		}
	}
}
