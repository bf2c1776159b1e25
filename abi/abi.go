// Package abi is the contract between the groupstate host and a handler module compiled to
// WebAssembly: the names of exports and imports, the byte layout of every buffer that crosses
// the boundary, status codes and the ABI version.
//
// The normative specification is abi/README.md; this package mirrors it as constants and as a
// dependency-free encoder and decoder that both the host (runtime/engine,
// runtime/internal/handler and runtime/internal/host) and the Go SDK (package sdk/go) use, so
// the two sides cannot drift apart.
//
// All integers are little-endian. Lengths and counts are u32, times are i64 milliseconds since
// the Unix epoch. Nothing in a buffer is aligned.
//
// Version 2 ([Version2], README section 9, a draft not accepted yet) is for transformWithState
// handlers: the init result declares state variables ([AppendInitResultV2],
// [ParseInitResultV2]); a process buffer holds DATA, TIMERS or INITIAL groups
// ([AppendDataGroup], [InputReaderV2]); the guest reads and writes its state with op lists
// ([OpWriter], [OpReader]), sent through the [ImportState] host function, whose read answers
// it decodes with [AnswerReader]; and a group result carries the remaining writes
// ([ResultWriterV2], [ResultReaderV2]). A deployment with several named inputs sets
// [InitHasInputs]: the init buffer lists the input names ([Init.Inputs]) and each DATA row
// carries its input's index ([AppendDataGroupInputs], [InputReaderV2.SetInputCount],
// [RowCursor.Input]). The version 1 names are unchanged.
//
// Readers never copy: the slices they return alias the buffer they read and are valid as long
// as it is. Readers and writers are not safe for concurrent use; the functions are.
package abi

// Version is the ABI version this package describes. A module reports the version it was built
// for from the [ExportABIVersion] export; the host refuses a module whose version it does not
// support.
const Version uint32 = 1

// Names of the functions and memory a module exports.
const (
	// ExportABIVersion is "gs_abi_version": () -> i32. Returns the ABI version the module
	// implements. It must not depend on initialization: the host calls it first.
	ExportABIVersion = "gs_abi_version"

	// ExportAlloc is "gs_alloc": (size i32) -> i32. Returns the offset in the module's memory of
	// a buffer of at least size bytes that the host may write the next [ExportInit] or
	// [ExportProcess] input into. The buffer belongs to the module; it only has to stay valid
	// until the next call into the module. Returns 0 when it cannot allocate.
	ExportAlloc = "gs_alloc"

	// ExportInit is "gs_init": (ptr i32, len i32) -> i64. Called once per instance, before any
	// [ExportProcess], with an init buffer (see [AppendInit]). Returns a packed result pointer
	// (see [PackResult]) to an init result buffer (see [AppendInitResult]).
	ExportInit = "gs_init"

	// ExportProcess is "gs_process": (ptr i32, len i32) -> i64. Called with a process buffer
	// holding many groups (see [InputReader]); returns a packed result pointer to a result buffer
	// holding one result per group, in the same order (see [ResultReader]).
	ExportProcess = "gs_process"

	// ExportMemory is "memory", the module's linear memory. Required.
	ExportMemory = "memory"

	// ExportInitialize is "_initialize", the WASI reactor initializer. Optional; when present
	// the host calls it once per instance before anything else.
	ExportInitialize = "_initialize"

	// ExportGroupCell is "gs_group_cell": () -> i32. Optional, ABI v1 only. Returns the offset
	// of a 4-byte cell (u32, little-endian, unaligned) in the module's memory, or 0 for none.
	// The host calls it once per instance, after a successful [ExportInit]. The module writes
	// into the cell the index of the group whose handler is about to run (0xFFFFFFFF outside
	// any group), and the host reads it only when the module logs or writes to stdout or
	// stderr, to tag the output with that group's key: a module with a cell need not call
	// [ImportGroupBegin] (a host function call per group). See abi/README.md 2.1.
	ExportGroupCell = "gs_group_cell"
)

// Names of the host functions a module may import, all from the module [ImportModule].
// Besides these, a module may import "wasi_snapshot_preview1" functions; the host provides
// WASI with no files, no environment, no arguments and no network.
const (
	// ImportModule is "groupstate", the import module of the host functions below.
	ImportModule = "groupstate"

	// ImportGroupBegin is "group_begin": (index i32) -> (). Optional. A module calls it before
	// running the handler for the group at index (0-based) of the current process buffer, so
	// the host can tag what the module writes to stdout and stderr with that group's key. A v1
	// module may instead write the index into its group cell ([ExportGroupCell]); ABI v2
	// requires this import.
	ImportGroupBegin = "group_begin"

	// ImportLog is "log": (level i32, ptr i32, len i32) -> (). Optional. Writes the UTF-8
	// message at ptr to the host's log at level (see [LogDebug]...), tagged with the deployment
	// and the key of the current group.
	ImportLog = "log"

	// WASIModule is the name of the WASI preview 1 import module.
	WASIModule = "wasi_snapshot_preview1"
)

// Log levels for [ImportLog]. They match log/slog's levels.
const (
	LogDebug int32 = -4
	LogInfo  int32 = 0
	LogWarn  int32 = 4
	LogError int32 = 8
)

// TimeoutMode is a deployment's timeout configuration, as passed in the init buffer.
type TimeoutMode uint32

const (
	// TimeoutNone: the handler may not set timeouts.
	TimeoutNone TimeoutMode = 0
	// TimeoutProcessingTime: the handler may set timeouts as durations from the batch's
	// processing time.
	TimeoutProcessingTime TimeoutMode = 1
	// TimeoutEventTime: the handler may set timeouts as event-time timestamps, compared with
	// the watermark.
	TimeoutEventTime TimeoutMode = 2
)

// String returns the mode as it is written in a deployment spec.
func (m TimeoutMode) String() string {
	switch m {
	case TimeoutNone:
		return "none"
	case TimeoutProcessingTime:
		return "processing_time"
	case TimeoutEventTime:
		return "event_time"
	}
	return "unknown"
}

// Init flags.
const (
	// InitHasWatermark is set when the deployment configures an event-time column and a
	// watermark delay, so currentWatermarkMs is defined.
	InitHasWatermark uint32 = 1 << 0
	// InitHasInputs (ABI v2 only, section 9.3a of abi/README.md) is set when the deployment
	// reads several named inputs (the spec's inputs list): the init buffer then ends with the
	// input names ([Init.Inputs]), and every row of a DATA group starts with the index of its
	// input among them.
	InitHasInputs uint32 = 1 << 1
)

// Group flags in a process buffer.
const (
	// GroupTimedOut is set on a timeout call: the group has no rows and hasTimedOut is true.
	GroupTimedOut uint32 = 1 << 0
	// GroupStateExists is set when the key has a state value; the state bytes follow.
	GroupStateExists uint32 = 1 << 1
)

// Status is the outcome of a whole call ([ExportInit], [ExportProcess]) or of one group.
type Status uint32

const (
	// StatusOK: success.
	StatusOK Status = 0
	// StatusError: failure; an error message follows.
	StatusError Status = 1
)

// Action is what a group's call did to its state value.
type Action uint32

const (
	// ActionKeep: the value is unchanged (neither update nor remove was called).
	ActionKeep Action = 0
	// ActionUpdate: the value is replaced by the state bytes of the result.
	ActionUpdate Action = 1
	// ActionRemove: the value is removed.
	ActionRemove Action = 2
)

// NoTimeout is the timeout value of a group result with no timeout set.
const NoTimeout int64 = 0
