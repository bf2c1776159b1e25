// Package registry is groupstate's control plane in NATS: the deployment records ([Record],
// with their [Handover]s), the [Registry] that keeps them in a KV bucket and watches them
// ([Event]), the modules and initial states it stores by [Digest] in an object store, the
// status documents and the owners of deployments.
package registry
