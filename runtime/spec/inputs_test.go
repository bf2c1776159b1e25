package spec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/spec"
)

const joinSpec = `
name: adjoin
module: adjoin.wasm
inputs:
  - name: impressions
    subjects: ["ads.impressions.>"]
    key: {field: ad_id}
    event_time: {field: ts, watermark_delay: 2h}
  - name: clicks
    subjects: ["ads.clicks.>"]
    stream: CLICKS
    key: {field: ad_id}
    event_time: {field: ts, watermark_delay: 3h}
timeout: event_time
output:
  subject: adjoin.out
`

func TestParseSpecInputs(t *testing.T) {
	s := specFromYAML(t, joinSpec)
	if !s.HasInputs() || !s.HasEventTime() || s.WatermarkPolicy != spec.WatermarkMin {
		t.Fatalf("inputs %v, event time %v, policy %q", s.HasInputs(), s.HasEventTime(), s.WatermarkPolicy)
	}
	in := s.InputList()
	if len(in) != 2 || in[0].Name != "impressions" || in[1].Stream != "CLICKS" || in[1].EventTime.WatermarkDelay.Std().Hours() != 3 || in[0].Subjects[0] != "ads.impressions.>" {
		t.Fatalf("inputs: %+v", in)
	}
	if err := s.ValidateForService(); err != nil {
		t.Fatal(err)
	}

	one := specFromYAML(t, "name: a\ninput: {subjects: [x]}\nkey: {field: k}\n")
	if l := one.InputList(); one.HasInputs() || len(l) != 1 || l[0].Name != "" || l[0].Key.Field != "k" || l[0].Subjects[0] != "x" || one.WatermarkPolicy != "" {
		t.Fatalf("one input: %+v", l)
	}
}

func TestParseSpecInputsErrors(t *testing.T) {
	for _, c := range []struct {
		name, edit, old, want string
	}{
		{"top-level key", "key: {field: ad_id}\n", "", "inputs replaces input, key and event_time"},
		{"bad policy", "watermark_policy: avg\n", "", `watermark_policy "avg" must be "min" or "max"`},
		{"duplicate name", "", "name: clicks", `inputs[1].name "impressions" is the name of an earlier input`},
		{"bad name", "", "name: clicks", ""},
		{"overlap", "", `"ads.clicks.>"`, `inputs[clicks].subjects: "ads.*.x" overlaps "ads.impressions.>" of input "impressions"`},
		{"event time on one", "", "    event_time: {field: ts, watermark_delay: 3h}\n", "event_time is set on 1 of 2 inputs"},
		{"partitions", "partitions: 4\n", "", "inputs with partitions above 1 are not supported yet"},
		{"subject token", "", "key: {field: ad_id}\n    event_time: {field: ts, watermark_delay: 3h}", "inputs[clicks].key.subject_token is not supported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			y := joinSpec + c.edit
			switch c.name {
			case "duplicate name":
				y = strings.Replace(y, c.old, "name: impressions", 1)
			case "bad name":
				y = strings.Replace(y, c.old, "name: Clicks.x", 1)
				c.want = `inputs[1].name "Clicks.x" must be 1 to 32 characters`
			case "overlap":
				y = strings.Replace(y, c.old, `"ads.*.x"`, 1)
			case "event time on one":
				y = strings.Replace(y, c.old, "", 1)
			case "subject token":
				y = strings.Replace(y, c.old, "key: {field: ad_id, subject_token: 2}\n    event_time: {field: ts, watermark_delay: 3h}", 1)
			}
			_, err := spec.ParseSpec([]byte(y))
			if !errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}
