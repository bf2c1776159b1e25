package natsio

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultReplicas is the number of replicas of the streams, KV buckets and object stores
// groupstate creates when the caller does not choose: 3 when nc is connected to a clustered
// server (one that names its cluster), 1 otherwise. Streams and buckets that exist keep
// their own.
func DefaultReplicas(nc *nats.Conn) int {
	if nc != nil && nc.ConnectedClusterName() != "" {
		return 3
	}
	return 1
}

// JetStream API error codes of a creation that asks for more replicas than the server can
// give (the server's JSInsufficientResourcesErr and JSStreamReplicasNotSupportedErr).
const (
	errCodeInsufficientResources jetstream.ErrorCode = 10023
	errCodeReplicasNotSupported  jetstream.ErrorCode = 10074
)

// ReplicasFor returns n, or the default for js's connection when n is 0 or less.
func ReplicasFor(js jetstream.JetStream, n int) int {
	if n > 0 {
		return n
	}
	return DefaultReplicas(js.Conn())
}

// ExplainReplicas adds what to do to a creation error caused by asking for more replicas
// than the cluster has JetStream servers.
func ExplainReplicas(err error, replicas int) error {
	var apiErr *jetstream.APIError
	if replicas > 1 && errors.As(err, &apiErr) && (apiErr.ErrorCode == errCodeInsufficientResources || apiErr.ErrorCode == errCodeReplicasNotSupported) {
		return fmt.Errorf("%w (asked for %d replicas: fewer JetStream servers in the cluster? set serve --replicas)", err, replicas)
	}
	return err
}
