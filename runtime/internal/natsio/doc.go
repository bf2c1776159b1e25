// Package natsio holds the small NATS helpers that groupstate's NATS packages share:
// ensuring streams ([EnsureStream], [StreamName]) and KV buckets ([OpenKV]), the replica
// count of what groupstate creates ([DefaultReplicas]) and what to say when a cluster cannot
// give it, reading one message from a stream's leader ([LeaderGet]), telling a refused
// expected last sequence ([WrongLastSequence]), and a few timeouts and header names used on
// both sides. The concepts built on it have packages of their own: input, output, registry,
// changelog and cluster. Connections and the embedded server are public, in package service.
package natsio
