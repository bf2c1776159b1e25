// Package natsio is groupstate's NATS plumbing: streams, the input source, the output
// publisher, the deployment registry (KV and object store), the changelogs of replicated
// deployments and their snapshots ([changelog.Snapshots]), and the membership of the
// runtimes sharing a cluster ([cluster.JoinMembers]). Connections and the embedded
// server are public, in package service.
package natsio
