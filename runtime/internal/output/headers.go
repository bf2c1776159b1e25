package output

// Header names on outputs, dead letters and late rows (package service documents and
// re-exports them). Only this package maps outbox entries to headers.
const (
	HeaderDeployment  = "Groupstate-Deployment"
	HeaderKey         = "Groupstate-Key"
	HeaderBatch       = "Groupstate-Batch"
	HeaderReason      = "Groupstate-Reason"
	HeaderError       = "Groupstate-Error"
	HeaderSubject     = "Groupstate-Subject"
	HeaderSequence    = "Groupstate-Sequence"
	HeaderTimeoutCall = "Groupstate-Timeout-Call"
)
