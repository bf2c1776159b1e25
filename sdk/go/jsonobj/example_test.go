package jsonobj_test

import (
	"fmt"

	"github.com/groupstate/groupstate/sdk/go/jsonobj"
)

type session struct{ Start, End int64 }

func (s *session) UnmarshalJSON(b []byte) error {
	return jsonobj.Each(b, func(name, value []byte) (err error) {
		switch string(name) {
		case "start":
			s.Start, err = jsonobj.Int(value)
		case "end":
			s.End, err = jsonobj.Int(value)
		}
		return err
	})
}

func (s session) AppendJSON(dst []byte) ([]byte, error) {
	w := jsonobj.NewWriter(dst)
	w.Int("start", s.Start)
	w.Int("end", s.End)
	return w.End()
}

// A type decodes and encodes itself without reflection; the Go SDK's typed layer then uses
// these methods instead of encoding/json.
func Example() {
	var s session
	if err := s.UnmarshalJSON([]byte(`{"end": 20, "start": 10, "other": [1, 2]}`)); err != nil {
		panic(err)
	}
	s.End += 5
	b, _ := s.AppendJSON(nil)
	fmt.Println(string(b))

	fmt.Println(s.UnmarshalJSON([]byte(`{"start": 1.5}`)))
	// Output:
	// {"start":10,"end":25}
	// jsonobj: want an integer, got 1.5
}
