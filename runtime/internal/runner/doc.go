// Package runner runs one partition of a deployment: its micro-batch loop.
//
// A [Runner] takes batches from one seam, a batchSource (the live input, read through a
// durable consumer with a prefetch; or, for a shadow deployment, its primary's recorded
// batches, which end once the shadow is promoted), runs each through the engine, has the
// source acknowledge the input once the batch committed, and publishes the partition's status
// document. Around the loop it heals a deleted stream or consumer, reconciles the committed
// input position with the stream at each open, routes the input to the partitions (partition
// 0 of a deployment the runtime splits), shares its partition's event-time watermark with the
// others, runs the drain batch of undeploy --drain and, for a replicated deployment, restores
// from and snapshots to the changelog (see [BuildReplicated]).
//
// What a runner needs of the process it runs in comes through two values given to Build:
// [Config], what the runners of a process share and only read, and [Deps], the behaviour the
// process provides (ensuring streams once per revision, the watermarks' view, the router,
// where a status goes, what a lost changelog write or a failed store means). The package
// imports nothing of the service that holds its runners; which runners run where is decided
// there (runtime/internal/placement) and carried out with Build, Start and Stop.
package runner
