// Package changelog is groupstate's durability in NATS: the changelogs of replicated
// deployments ([Changelog], a subject per partition whose appends are fenced by the expected
// last sequence), their snapshots in an object store ([Snapshots]) and the batch manifests
// kept for replay ([ManifestsStream]).
//
// Replication lives here too. The owner of a partition writes through a [Replicator] (the
// keyspace's state.Replicator, which appends every write before it is applied locally); a
// new owner and a standby copy bring their keyspace up to the log with [Restore] (from a
// known [Position], the keyspace's own last batch, or the newest snapshot); a standby then
// follows the log with the same [Applier], the one loop that reads records, skips fences,
// applies the rest and tracks the last record held.
package changelog
