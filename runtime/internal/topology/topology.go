// Package topology names everything a deployment has on NATS and in the state store: its
// streams, their subjects, its consumers and its keyspaces, and says where each partition
// reads its input. Every such name is made here and nowhere else, so that the runtime, the
// client, replay and the tests agree on them by construction.
//
// A deployment's input-side names (its input streams, the inputs stream of several inputs, the
// partitioned stream and the router's consumer) follow the deployment whose input it reads:
// its own, or for a shadow (and a promoted shadow) its primary's; see [registry.Record].InputOf.
// Its output-side names (outputs, manifests, changelog, keyspaces, consumers) are its own.
//
// The package holds names only: it depends on no NATS client and changes nothing.
package topology

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
)

// StreamName derives a valid stream name from a deployment name and suffix: "GS_" followed
// by s upper-cased, every character other than [A-Z0-9_-] replaced by '_'.
// StreamName("login-count_in") is "GS_LOGIN-COUNT_IN".
func StreamName(s string) string {
	var b strings.Builder
	b.Grow(3 + len(s))
	b.WriteString("GS_")
	for _, r := range strings.ToUpper(s) {
		switch {
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// The default streams of a deployment, used when its spec names none and no stream captures
// the subjects yet.

// InputStream is the default input stream of deployment (one input): GS_<DEPLOYMENT>_IN.
func InputStream(deployment string) string { return StreamName(deployment + "_IN") }

// NamedInputStream is the default stream of input name of deployment (several inputs):
// GS_<DEPLOYMENT>_IN_<NAME>.
func NamedInputStream(deployment, name string) string {
	return StreamName(deployment + "_IN_" + name)
}

// OutputStream, DeadLetterStream and LateStream are the default streams of deployment's
// outputs, dead letters and late rows: GS_<DEPLOYMENT>_OUT, _DLQ and _LATE.
func OutputStream(deployment string) string     { return StreamName(deployment + "_OUT") }
func DeadLetterStream(deployment string) string { return StreamName(deployment + "_DLQ") }
func LateStream(deployment string) string       { return StreamName(deployment + "_LATE") }

// Consumer is the name of deployment's durable consumer on its input: "groupstate-<name>".
func Consumer(deployment string) string { return "groupstate-" + deployment }

// PartitionConsumer is the durable consumer of partition p of deployment split into parts
// partitions: [Consumer] of the deployment with one partition, "groupstate-<name>-p<p>"
// with several.
func PartitionConsumer(deployment string, p, parts int) string {
	if parts > 1 {
		return Consumer(fmt.Sprintf("%s-p%d", deployment, p))
	}
	return Consumer(deployment)
}

// RouterConsumer is the name of the router's durable consumer on deployment's input:
// "groupstate-<deployment>-router".
func RouterConsumer(deployment string) string { return Consumer(deployment) + "-router" }

// Keyspace names the unit of partition p of deployment split into parts partitions: its
// keyspace in the state store, the key of its status and what the state API is asked by.
// With one partition it is the deployment's name; with several, state.PartitionName's
// "<deployment>.<p>".
func Keyspace(deployment string, p, parts int) string {
	if parts <= 1 {
		return deployment
	}
	return state.PartitionName(deployment, p)
}

// InputsStream is the stream of a deployment with several inputs that sources them all:
// GS_<DEPLOYMENT>_INPUTS, subjects [InputsFilter].
func InputsStream(deployment string) string { return StreamName(deployment + "_INPUTS") }

// InputsPrefix is what every subject of deployment's inputs stream starts with:
// "gs.in.<deployment>.", followed by "<input>.<original subject>".
func InputsPrefix(deployment string) string { return "gs.in." + deployment + "." }

// InputsFilter is the filter of the consumer on deployment's inputs stream: "gs.in.<deployment>.>".
func InputsFilter(deployment string) string { return InputsPrefix(deployment) + ">" }

// PartitionedStream is the name of deployment's partitioned stream (GS_<DEPLOYMENT>_KG): its
// input, a subject per partition, written by the router or sourced by the server.
func PartitionedStream(deployment string) string { return StreamName(deployment + "_KG") }

// PartitionPrefix is what every subject of deployment's partitioned stream starts with:
// "gs.kg.<deployment>.".
func PartitionPrefix(deployment string) string { return "gs.kg." + deployment + "." }

// PartitionSubject is partition p's subject in deployment's partitioned stream:
// "gs.kg.<deployment>.<p>".
func PartitionSubject(deployment string, p int) string {
	return PartitionPrefix(deployment) + strconv.Itoa(p)
}

// PartitionFilter is the filter of partition p's consumer on deployment's partitioned stream:
// its subject when the router writes it, the subject and every input subject under it
// ("gs.kg.<deployment>.<p>.>") when the server sources it (bySubject).
func PartitionFilter(deployment string, p int, bySubject bool) string {
	if bySubject {
		return PartitionSubject(deployment, p) + ".>"
	}
	return PartitionSubject(deployment, p)
}

// ChangelogStream is the name of deployment's changelog stream: GS_<DEPLOYMENT>_CL.
func ChangelogStream(deployment string) string { return StreamName(deployment + "_CL") }

// ChangelogSubject is the subject of partition's changelog of deployment:
// "gs.cl.<deployment>.<partition>".
func ChangelogSubject(deployment string, partition int) string {
	return "gs.cl." + deployment + "." + strconv.Itoa(partition)
}

// ChangelogFilter is the filter of every partition's changelog of deployment: "gs.cl.<deployment>.>".
func ChangelogFilter(deployment string) string { return "gs.cl." + deployment + ".>" }

// ManifestsStream is the name of deployment's manifests stream: GS_<DEPLOYMENT>_BATCHES.
func ManifestsStream(deployment string) string { return StreamName(deployment + "_BATCHES") }

// ManifestsPrefix is what every subject of deployment's manifests stream starts with:
// "gs.batches.<deployment>.".
func ManifestsPrefix(deployment string) string { return "gs.batches." + deployment + "." }

// ManifestSubject is the subject of partition's manifests of deployment:
// "gs.batches.<deployment>.<partition>".
func ManifestSubject(deployment string, partition int) string {
	return ManifestsPrefix(deployment) + strconv.Itoa(partition)
}

// ManifestsFilter is the filter of every partition's manifests of deployment.
func ManifestsFilter(deployment string) string { return ManifestsPrefix(deployment) + ">" }

// Read says where partition p of the deployment of sp reads its rows: the stream and the
// filters of its consumer. inputOf names the deployment whose input-side streams it reads
// (registry.Record.InputOf: a shadow's primary's; empty: sp.Name). inputStream is its input
// stream (the spec's input.stream, or the stream that captures its input subjects), which it
// reads itself with one partition and one input: with several partitions it reads its
// subject of the partitioned stream, with several inputs the inputs stream.
func Read(sp *spec.Spec, inputOf string, p int, inputStream string) (stream string, filters []string) {
	name := cmp.Or(inputOf, sp.Name)
	switch {
	case sp.Partitions > 1:
		return PartitionedStream(name), []string{PartitionFilter(name, p, sp.Key.SubjectToken > 0)}
	case sp.HasInputs():
		return InputsStream(name), []string{InputsFilter(name)}
	}
	return inputStream, sp.Input.Subjects
}
