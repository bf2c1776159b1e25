// Package natsio is groupstate's NATS plumbing: the embedded server, connections, streams,
// the input source, the output publisher and the deployment registry (KV and object store).
package natsio
