package state

import "errors"

var (
	// ErrClosed is returned by every operation on a Store (and its
	// Deployment and Batch handles) after Store.Close.
	ErrClosed = errors.New("state: closed")

	// ErrFormatVersion is returned by Open when the store was written with a
	// newer or unknown on-disk format, or is not a groupstate store. The
	// returned error wraps it with detail.
	ErrFormatVersion = errors.New("state: unsupported format version")

	// ErrReadOnly is returned by writes on a Store opened with
	// Options.ReadOnly.
	ErrReadOnly = errors.New("state: read-only")

	// ErrInvalidName is returned by every operation on a Deployment whose
	// name is not [a-z0-9-]{1,255}.
	ErrInvalidName = errors.New("state: invalid deployment name")

	// ErrCorrupt is returned when a stored record cannot be decoded.
	ErrCorrupt = errors.New("state: corrupt record")

	// ErrBatchOrder is returned by Batch.Commit when the batch id is not
	// greater than the id of the last committed batch.
	ErrBatchOrder = errors.New("state: batch id not after last committed batch")

	// ErrBatchDone is returned by Batch.Commit on a batch already committed
	// or closed.
	ErrBatchDone = errors.New("state: batch already committed or closed")

	// ErrFailed is wrapped by the errors of every operation after a commit
	// failed in a way that leaves Pebble's in-memory state unreliable (a
	// failed WAL write or sync). Close the Store and open it again.
	ErrFailed = errors.New("state: store failed, reopen required")

	// ErrReplication is wrapped, together with the Replicator's own error,
	// by the error of a write whose Replicator.Replicate failed. Nothing of
	// such a write is applied locally.
	ErrReplication = errors.New("state: replication failed")

	// ErrForeignWrite is returned by Deployment.ApplyReplicated for a
	// replicated write holding a key outside the deployment's keyspace (a
	// misdirected or corrupt record). Nothing of it is applied.
	ErrForeignWrite = errors.New("state: replicated write outside the deployment's keyspace")
)

// Errors of ABI v2 state variables (see VarDecl and KeyTxn).
var (
	// ErrVarKind is wrapped by the error of Deployment.CheckVars and
	// Batch.DeclareVars when a variable is declared with another kind than
	// before: "state variable NAME was declared KIND1 and is now KIND2".
	ErrVarKind = errors.New("state: state variable changed kind")

	// ErrInvalidVar is wrapped by the error of Deployment.CheckVars and
	// Batch.DeclareVars for malformed declarations (an empty or repeated name,
	// an unknown kind, a negative TTL).
	ErrInvalidVar = errors.New("state: invalid state variable declaration")

	// ErrVarOp is wrapped by the error of a KeyTxn operation on a variable
	// index out of range or on a variable of another kind.
	ErrVarOp = errors.New("state: invalid state variable operation")

	// ErrTxnDone is returned by the operations of a KeyTxn already committed
	// or discarded.
	ErrTxnDone = errors.New("state: key transaction already committed or discarded")

	// ErrTxnOpen is returned by Batch.Key, DeclareVars, ExpireTTL and Commit
	// while a KeyTxn of the batch is open (neither committed nor discarded).
	ErrTxnOpen = errors.New("state: a key transaction of the batch is open")
)
