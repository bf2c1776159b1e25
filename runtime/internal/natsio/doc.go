// Package natsio is groupstate's NATS plumbing: streams, the input source, the output
// publisher and the deployment registry (KV and object store). Connections and the embedded
// server are public, in package service.
package natsio
