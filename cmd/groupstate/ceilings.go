package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/spec"
)

// ceilingFlags are serve's --max-* and --quarantine-after flags: the runtime's ceilings
// (engine.Ceilings; docs/guarantees.md, "The sandbox").
type ceilingFlags struct {
	memory, outputCall, outputBatch, stateCall, stateBatch, logBytes, moduleBytes, stack string
	instances, quarantineAfter                                                           int
	tableElements                                                                        uint32
	callTimeout                                                                          time.Duration
}

func (f *ceilingFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.memory, "max-memory", "1GiB", "the most limits.memory a spec may ask (memory per module instance)")
	fl.IntVar(&f.instances, "max-instances", engine.DefaultCeilingInstances, "the most limits.instances a spec may ask (a spec that sets none gets the CPUs, at most this)")
	fl.DurationVar(&f.callTimeout, "max-call-timeout", engine.DefaultCeilingCallTimeout, "the most limits.call_timeout a spec may ask")
	fl.StringVar(&f.outputCall, "max-output-bytes", "256MiB", "the most limits.max_output_bytes a spec may ask (result bytes per guest call)")
	fl.StringVar(&f.outputBatch, "max-batch-output", "256MiB", "output and state bytes per batch, or transformWithState batch phase (at most 512MiB): keys whose results would pass it are dead-lettered")
	fl.StringVar(&f.stateCall, "max-state-writes-call", "64MiB", "transformWithState state writes per guest call")
	fl.StringVar(&f.stateBatch, "max-state-writes-batch", "256MiB", "transformWithState state writes per batch phase")
	fl.StringVar(&f.logBytes, "max-log-bytes", "256KiB", "what a module may log (log calls, stdout, stderr) per guest call; the rest is dropped")
	fl.StringVar(&f.moduleBytes, "max-module-bytes", "64MiB", "the largest module deploy accepts")
	fl.Uint32Var(&f.tableElements, "max-table-elements", 100_000, "elements per module table (table.grow fails beyond)")
	fl.StringVar(&f.stack, "max-stack", "8MiB", "a guest call's stack, estimated (deeper calls trap with a stack overflow)")
	fl.IntVar(&f.quarantineAfter, "quarantine-after", engine.DefaultQuarantineAfter, "batches in a row a key's call may fail as a whole (trap, time, memory or stack limit) before the key is quarantined until the next deploy")
}

// ceilings parses the flags.
func (f *ceilingFlags) ceilings() (engine.Ceilings, error) {
	c := engine.Ceilings{Instances: f.instances, CallTimeout: f.callTimeout, TableElements: f.tableElements, QuarantineAfter: f.quarantineAfter}
	sizes := []struct {
		flag, v string
		set     func(n uint64)
		max     uint64
	}{
		{"--max-memory", f.memory, func(n uint64) { c.InstanceMemory = int64(n) }, 4 << 30},
		{"--max-output-bytes", f.outputCall, func(n uint64) { c.OutputBytesPerCall = int64(n) }, 2 << 30},
		// A batch commits in one Pebble batch (at most 4 GiB): its input and dead letters
		// (256 MiB each at most), and its outputs, states and state writes, counted per
		// phase (a transformWithState batch has up to three), must stay below it, whatever
		// the flags: 0.5 + 3 x (0.5 + 0.5) GiB.
		{"--max-batch-output", f.outputBatch, func(n uint64) { c.OutputBytesPerBatch = int64(n) }, 512 << 20},
		{"--max-state-writes-call", f.stateCall, func(n uint64) { c.StateBytesPerCall = int64(n) }, 512 << 20},
		{"--max-state-writes-batch", f.stateBatch, func(n uint64) { c.StateBytesPerBatch = int64(n) }, 512 << 20},
		{"--max-log-bytes", f.logBytes, func(n uint64) { c.LogBytesPerCall = int(n) }, 1 << 30},
		{"--max-module-bytes", f.moduleBytes, func(n uint64) { c.ModuleBytes = int(n) }, 1 << 30},
		{"--max-stack", f.stack, func(n uint64) { c.StackBytes = int(n) }, 1 << 30},
	}
	for _, s := range sizes {
		n, err := spec.ParseByteSize(s.v)
		if err != nil {
			return c, fmt.Errorf("%s: %v", s.flag, err)
		}
		if n == 0 || uint64(n) > s.max {
			return c, fmt.Errorf("%s %s: want more than 0 and at most %s", s.flag, s.v, spec.ByteSize(s.max))
		}
		s.set(uint64(n))
	}
	switch {
	case f.instances < 1 || f.instances > spec.MaxInstances:
		return c, fmt.Errorf("--max-instances %d: want 1 to %d", f.instances, spec.MaxInstances)
	case f.callTimeout <= 0:
		return c, fmt.Errorf("--max-call-timeout %s: want more than 0", f.callTimeout)
	case f.tableElements == 0:
		return c, fmt.Errorf("--max-table-elements: want more than 0")
	case f.quarantineAfter < 1:
		return c, fmt.Errorf("--quarantine-after %d: want at least 1", f.quarantineAfter)
	}
	return c, nil
}
