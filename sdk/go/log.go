package groupstate

import "github.com/groupstate/groupstate/abi"

// Level is the severity of a [Log] message. The values match log/slog's levels.
type Level int32

// Log levels.
const (
	LevelDebug Level = Level(abi.LogDebug)
	LevelInfo  Level = Level(abi.LogInfo)
	LevelWarn  Level = Level(abi.LogWarn)
	LevelError Level = Level(abi.LogError)
)

// Log writes msg to the host's log at level, tagged with the deployment and the key of the
// current group. Outside WebAssembly (native tests and benchmarks) it does nothing. Writing
// to stdout or stderr also reaches the host's log, but without a level.
func Log(level Level, msg string) { hostLog(int32(level), msg) }
