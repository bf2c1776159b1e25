package engine

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/host"
	"github.com/groupstate/groupstate/runtime/spec"
)

// ErrCeiling is wrapped by the error of a spec that asks for more than the runtime's
// [Ceilings] allow. The message names each field, what it asks and the ceiling.
var ErrCeiling = errors.New("engine: the spec asks for more than the runtime allows")

// Ceilings are what the runtime, not a spec, decides: the most a deployment's module may use
// (a spec asking for more is refused, naming the ceiling), and the bounds on host memory that
// no spec field sets. `groupstate serve` sets them with its --max-* flags; docs/guarantees.md
// ("The sandbox") lists each with its default. A zero field takes its default.
type Ceilings struct {
	// InstanceMemory is the most limits.memory may ask. Default 1 GiB.
	InstanceMemory int64 `json:"instance_memory,omitempty"`
	// Instances is the most limits.instances may ask; a spec that leaves it unset gets the
	// number of CPUs, at most this. Default 16.
	Instances int `json:"instances,omitempty"`
	// CallTimeout is the most limits.call_timeout may ask. Default 10m.
	CallTimeout time.Duration `json:"call_timeout,omitempty"`
	// OutputBytesPerCall is the most limits.max_output_bytes may ask. Default 256 MiB.
	OutputBytesPerCall int64 `json:"output_bytes_per_call,omitempty"`
	// OutputBytesPerBatch caps what one batch's calls emit, all together: a key whose
	// outputs would pass it is dead-lettered instead. Default 256 MiB.
	OutputBytesPerBatch int64 `json:"output_bytes_per_batch,omitempty"`
	// StateBytesPerCall and StateBytesPerBatch cap the state writes of a transformWithState
	// (ABI v2) module in one guest call and in one batch phase: a key whose writes would pass
	// one is dead-lettered. Defaults 64 MiB and 256 MiB.
	StateBytesPerCall  int64 `json:"state_bytes_per_call,omitempty"`
	StateBytesPerBatch int64 `json:"state_bytes_per_batch,omitempty"`
	// LogBytesPerCall caps what a module logs (groupstate.log, stdout, stderr) in one guest
	// call; the rest is dropped with one line saying so. Default 256 KiB.
	LogBytesPerCall int `json:"log_bytes_per_call,omitempty"`
	// ModuleBytes, TableElements and StackBytes are loading limits: the largest module, the
	// most elements a table may hold (table.grow fails beyond), and the guest's call stack.
	// Defaults 64 MiB, 100,000 and 8 MiB; the other loading limits are fixed (see
	// docs/guarantees.md).
	ModuleBytes   int    `json:"module_bytes,omitempty"`
	TableElements uint32 `json:"table_elements,omitempty"`
	StackBytes    int    `json:"stack_bytes,omitempty"`
	// QuarantineAfter is how many batches in a row a key's call may fail as a whole (a trap,
	// the time, memory or stack limit), pinned on that key alone, before the key is
	// quarantined: its rows are then dead-lettered without a call until the next deploy.
	// Default 3.
	QuarantineAfter int `json:"quarantine_after,omitempty"`
}

// The defaults of [Ceilings].
const (
	DefaultCeilingInstanceMemory = 1 << 30
	DefaultCeilingInstances      = 16
	DefaultCeilingCallTimeout    = 10 * time.Minute
	DefaultCeilingOutputPerCall  = 256 << 20
	DefaultQuarantineAfter       = 3
)

// EnsureDefaults sets every zero field to its default.
func (c *Ceilings) EnsureDefaults() {
	def64 := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def64(&c.InstanceMemory, DefaultCeilingInstanceMemory)
	def(&c.Instances, DefaultCeilingInstances)
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCeilingCallTimeout
	}
	def64(&c.OutputBytesPerCall, DefaultCeilingOutputPerCall)
	def64(&c.OutputBytesPerBatch, host.DefaultOutputBytesPerBatch)
	def64(&c.StateBytesPerCall, host.DefaultStateBytesPerCall)
	def64(&c.StateBytesPerBatch, host.DefaultStateBytesPerBatch)
	def(&c.LogBytesPerCall, host.DefaultLogBytesPerCall)
	def(&c.ModuleBytes, host.DefaultModuleBytes)
	if c.TableElements == 0 {
		c.TableElements = host.DefaultTableElements
	}
	def(&c.StackBytes, host.DefaultStackBytes)
	def(&c.QuarantineAfter, DefaultQuarantineAfter)
}

// Check refuses a spec that asks for more than c allows (c with its defaults), naming each
// field and its ceiling.
func (c Ceilings) Check(sp *spec.Spec) error {
	c.EnsureDefaults()
	var p []string
	if m := int64(sp.Limits.Memory); m > c.InstanceMemory {
		p = append(p, fmt.Sprintf("limits.memory %s is above the runtime's ceiling of %s (serve --max-memory)", spec.ByteSize(m), spec.ByteSize(c.InstanceMemory)))
	}
	if n := sp.Limits.Instances; n > c.Instances {
		p = append(p, fmt.Sprintf("limits.instances %d is above the runtime's ceiling of %d (serve --max-instances)", n, c.Instances))
	}
	if d := sp.Limits.CallTimeout.Std(); d > c.CallTimeout {
		p = append(p, fmt.Sprintf("limits.call_timeout %s is above the runtime's ceiling of %s (serve --max-call-timeout)", d, c.CallTimeout))
	}
	if n := int64(sp.Limits.MaxOutputBytes); n > c.OutputBytesPerCall {
		p = append(p, fmt.Sprintf("limits.max_output_bytes %s is above the runtime's ceiling of %s (serve --max-output-bytes)", spec.ByteSize(n), spec.ByteSize(c.OutputBytesPerCall)))
	}
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrCeiling, strings.Join(p, "; "))
}

// Min returns the lowest of each ceiling of c and o (each with its defaults): what a
// deployment that may run on either runtime may ask.
func (c Ceilings) Min(o Ceilings) Ceilings {
	c.EnsureDefaults()
	o.EnsureDefaults()
	c.InstanceMemory = min(c.InstanceMemory, o.InstanceMemory)
	c.Instances = min(c.Instances, o.Instances)
	c.CallTimeout = min(c.CallTimeout, o.CallTimeout)
	c.OutputBytesPerCall = min(c.OutputBytesPerCall, o.OutputBytesPerCall)
	c.OutputBytesPerBatch = min(c.OutputBytesPerBatch, o.OutputBytesPerBatch)
	c.StateBytesPerCall = min(c.StateBytesPerCall, o.StateBytesPerCall)
	c.StateBytesPerBatch = min(c.StateBytesPerBatch, o.StateBytesPerBatch)
	c.LogBytesPerCall = min(c.LogBytesPerCall, o.LogBytesPerCall)
	c.ModuleBytes = min(c.ModuleBytes, o.ModuleBytes)
	c.TableElements = min(c.TableElements, o.TableElements)
	c.StackBytes = min(c.StackBytes, o.StackBytes)
	c.QuarantineAfter = min(c.QuarantineAfter, o.QuarantineAfter)
	return c
}

// instances is how many instances a deployment of sp gets: what it asks, or the CPUs, at
// most the ceiling.
func (c Ceilings) instances(sp *spec.Spec) int {
	if n := sp.Limits.Instances; n > 0 {
		return n
	}
	return min(runtime.GOMAXPROCS(0), c.Instances)
}

// hostLimits are the host's limits of a deployment of sp on instances instances.
func (c Ceilings) hostLimits(sp *spec.Spec, instances int) (host.Limits, host.LoadLimits) {
	return host.Limits{
			MemoryBytes:         uint64(sp.Limits.Memory),
			CallTimeout:         sp.Limits.CallTimeout.Std(),
			RetryTimeout:        sp.Limits.RetryTimeout.Std(),
			MaxResultBytes:      uint32(min(uint64(sp.Limits.MaxOutputBytes), 1<<31)),
			Instances:           instances,
			LogBytesPerCall:     c.LogBytesPerCall,
			OutputBytesPerBatch: c.OutputBytesPerBatch,
			StateBytesPerCall:   c.StateBytesPerCall,
			StateBytesPerBatch:  c.StateBytesPerBatch,
		}, host.LoadLimits{
			ModuleBytes:   c.ModuleBytes,
			TableElements: c.TableElements,
			StackBytes:    c.StackBytes,
		}
}
