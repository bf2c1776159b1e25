package groupstate

// InputName gives a processor's row the name of the input it came from, for a deployment whose
// spec has several named inputs (the spec's inputs list; abi/README.md 9.3a), such as the two
// sides of a stream-stream join. Embed it in the row type R of a [StatefulProcessor] (R itself
// or, when R is a pointer, the struct it points to): the SDK sets it after decoding each row,
// and the row's Input method returns the name. encoding/json ignores it (it has no exported
// field).
//
//	type row struct {
//		groupstate.InputName
//		AdID json.RawMessage `json:"ad_id"`
//		TS   int64           `json:"ts"`
//	}
//
//	for r := range rows {
//		switch r.Input() {
//		case "impressions": ...
//		case "clicks": ...
//		}
//	}
//
// Input is the empty string for a deployment with one input (input). The names are listed at
// Init by [ProcessorHandle.Inputs].
type InputName struct{ name string }

// Input returns the name of the input the row came from, or "" for a deployment with one
// input.
func (n InputName) Input() string { return n.name }

// setInput sets the name; the SDK finds it through the row type's method set. A nil n (a row
// type that embeds *InputName, left nil) is left alone.
func (n *InputName) setInput(name string) {
	if n != nil {
		n.name = name
	}
}

// inputSetter is implemented by a pointer to a type that embeds [InputName].
type inputSetter interface{ setInput(name string) }
