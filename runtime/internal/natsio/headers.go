package natsio

// Header names on outputs and dead letters. Package runtime re-exports them.
const (
	HeaderDeployment = "Groupstate-Deployment"
	HeaderKey        = "Groupstate-Key"
	HeaderBatch      = "Groupstate-Batch"
	HeaderReason     = "Groupstate-Reason"
	HeaderError      = "Groupstate-Error"
	HeaderSubject    = "Groupstate-Subject"
	HeaderSequence   = "Groupstate-Sequence"
)
