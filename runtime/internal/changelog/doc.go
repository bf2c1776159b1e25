// Package changelog is groupstate's durability in NATS: the changelogs of replicated
// deployments ([Changelog], a subject per partition whose appends are fenced by the expected
// last sequence), their snapshots in an object store ([Snapshots]) and the batch manifests
// kept for replay ([ManifestsStream]). It also holds the partitioned input streams (the
// [Router], [EnsureSourcedPartitionedStream] and the inputs stream, [EnsureInputsStream]):
// the router reads its stream from the leader with the Changelog's leader get, and the
// sourced and inputs streams share the router's naming and stream helpers.
package changelog
