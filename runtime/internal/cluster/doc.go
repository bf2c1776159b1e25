// Package cluster is what the runtimes sharing a NATS cluster know of each other: the
// membership of the live runtimes ([JoinMembers], in [MembersBucket]), the partition leases
// that fence an older owner ([Leases]) and the partitions' shared max event times
// ([Watermarks]), each a KV bucket.
package cluster
