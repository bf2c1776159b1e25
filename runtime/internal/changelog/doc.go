// Package changelog is groupstate's durability in NATS: the changelogs of replicated
// deployments ([Changelog], a subject per partition whose appends are fenced by the expected
// last sequence), their snapshots in an object store ([Snapshots]) and the batch manifests
// kept for replay ([ManifestsStream]).
package changelog
