// Package service is what `groupstate serve` runs: it watches the deployments recorded in
// NATS (package client writes them), claims each one for this runtime, and runs it: an input
// stream read by a durable pull consumer, the micro-batch engine of package engine over this
// runtime's Pebble store, outputs published from the outbox with deterministic message ids,
// status documents, Prometheus metrics and the request-reply state API.
//
// A program embeds it as
//
//	nc, _ := service.Connect(service.ConnOptions{URL: service.DefaultURL()})
//	svc, _ := service.New(ctx, service.Options{DataDir: dir, Conn: nc})
//	err := svc.Run(ctx) // until ctx ends
//
// and [StartEmbedded] starts the NATS server with JetStream that `serve` embeds by default.
package service
