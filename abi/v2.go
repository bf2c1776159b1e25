package abi

// Version2 is ABI version 2 (abi/README.md section 9, a draft not accepted yet): handlers in
// the style of Spark's transformWithState, with named state variables read through the
// [ImportState] host function and written through op lists (see [Op]). A v2 module returns 2
// from [ExportABIVersion]; [Version] keeps meaning version 1, whose layouts do not change.
const Version2 uint32 = 2

// ImportState is "state": (req_ptr i32, req_len i32, resp_ptr i32, resp_cap i32) -> i32, from
// [ImportModule]. Version 2 only. The request is an op list (see [OpWriter]) for the current
// group; the host applies its write ops, answers its read ops back to back (see
// [AnswerReader]) and returns the size of the answers, or [StateRefused].
const ImportState = "state"

// StateRefused is what [ImportState] returns when the host refused the request (malformed,
// an unknown variable, an op of the wrong kind, a timer op under timeout mode none, no current
// group). The group then fails with the host's message.
const StateRefused int32 = -1

// Limits of version 2.
const (
	// MaxVars is the largest number of state variables an init result may declare. A variable
	// index in an op is therefore below MaxVars.
	MaxVars = 256
	// MaxVarNameLen is the longest variable name, in bytes.
	MaxVarNameLen = 64
)

// malformedError is an [ErrMalformed] that says what is wrong.
type malformedError struct{ what string }

func (e *malformedError) Error() string { return ErrMalformed.Error() + ": " + e.what }
func (e *malformedError) Unwrap() error { return ErrMalformed }

// malformedErr returns an error wrapping [ErrMalformed] with a description.
func malformedErr(what string) error { return &malformedError{what: what} }
