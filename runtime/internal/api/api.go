// Package api is the wire format shared by the service and its client: the request-reply
// subjects a runtime answers on, their JSON bodies, and how a stored deployment record turns
// back into a spec.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/spec"
)

// Prefix is the prefix of the request-reply subjects: a runtime answers questions about the
// deployments it runs on Prefix + "<verb>.<deployment>"; requests and replies are JSON.
const Prefix = "groupstate.api."

// The verbs of the request-reply API.
const (
	// VerbState asks for one key's state ([StateRequest], [StateReply]).
	VerbState = "state"
	// VerbKeys lists keys a page at a time ([KeysRequest], [KeysReply]).
	VerbKeys = "keys"
	// VerbPing asks whether a runtime is up: the subject names the runtime's ID (its state
	// store's, the owner recorded for the deployments it runs) instead of a deployment, and
	// only that runtime replies, with an empty JSON object (see [Ping]).
	VerbPing = "ping"
	// VerbDrain asks the runtime that runs a deployment (or one partition of it: the subject
	// names the unit, "<deployment>.<p>") to run its last batch, firing every timeout, and
	// then to run nothing more ([DrainReply]); asked again, it answers again without a batch.
	VerbDrain = "drain"
	// VerbPurge asks one runtime (the subject names its ID, as for [VerbPing]) to delete
	// what its state store holds of an undeployed deployment: the keyspace of each of its
	// partitions ([PurgeRequest], [PurgeReply]). A runtime that still runs the deployment, or
	// sees it deployed, refuses.
	VerbPurge = "purge"
)

// PingTimeout is how long [Ping] waits for a runtime that is connected but slow to reply.
const PingTimeout = 2 * time.Second

// Ping tells whether the runtime with ID id is up: it answers [VerbPing] requests on its
// own subject. A runtime that does not reply within [PingTimeout] counts as gone; an error
// is returned only when NATS itself cannot be asked.
func Ping(ctx context.Context, nc *nats.Conn, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	_, err := nc.RequestWithContext(ctx, Subject(VerbPing, id), []byte("{}"))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return false, nil
	}
	return false, fmt.Errorf("asking whether runtime %s is up: %w", id, err)
}

// Subject is the request subject of verb for deployment.
func Subject(verb, deployment string) string { return Prefix + verb + "." + deployment }

// KeyState is one key's state on the wire. The client's public KeyState has the very same
// fields (it converts this type), so the two cannot drift apart.
type KeyState struct {
	Key json.RawMessage `json:"key"`
	// Value is a v1 handler's state value; for an ABI v2 (transformWithState) handler, the
	// object of its variables with content (a value variable's value, a list's array, a
	// map's object: the shape of an initial-state line's state).
	Value     json.RawMessage `json:"value,omitempty"`
	HasValue  bool            `json:"has_value"`
	TimeoutMs int64           `json:"timeout_ms,omitempty"`
	UpdatedMs int64           `json:"updated_ms,omitempty"`
	// Timers are an ABI v2 handler's timers of the key, ascending.
	Timers []int64 `json:"timers,omitempty"`
}

// StateRequest asks for the state of Key (a canonical JSON scalar).
type StateRequest struct {
	Key json.RawMessage `json:"key"`
}

// StateReply answers a [StateRequest]; Found is false when the key has neither a value nor a
// timeout.
type StateReply struct {
	Found bool `json:"found"`
	KeyState
}

// DrainReply answers a drain request: the drain batch's id and what it did.
type DrainReply struct {
	BatchID      uint64 `json:"batch_id"`
	TimeoutCalls int    `json:"timeout_calls"`
	Emitted      int    `json:"emitted"`
}

// PurgeRequest asks a runtime to delete its copy of Deployment's state.
type PurgeRequest struct {
	Deployment string `json:"deployment"`
}

// PurgeReply answers a [PurgeRequest]: the keyspaces the runtime deleted (the deployment's,
// "<deployment>.<p>" for a partition), none when it held nothing of it.
type PurgeReply struct {
	Dropped []string `json:"dropped"`
}

// KeysRequest asks for up to Limit keys after After (none: from the first key).
type KeysRequest struct {
	After json.RawMessage `json:"after,omitempty"`
	Limit int             `json:"limit"`
}

// The page sizes of [KeysRequest]: a Limit outside 1..MaxKeysLimit is taken as DefaultKeysLimit.
const (
	DefaultKeysLimit = 1000
	MaxKeysLimit     = 10000
)

// KeysReply answers a [KeysRequest]. Next is the last key of a full page (the After of the
// next request), empty on the last page.
type KeysReply struct {
	Keys []KeyState      `json:"keys"`
	Next json.RawMessage `json:"next,omitempty"`
}

// Error is the reply to a request that failed.
type Error struct {
	Error string `json:"error"`
}

// SpecOf decodes and validates the spec stored in a deployment record.
func SpecOf(rec registry.Record) (*spec.Spec, error) {
	return decodeSpec(rec.Spec)
}

// RunSpecOf returns the spec the deployment of rec runs with: for a shadow (rec.ShadowOf),
// its shadow spec (rec.ShadowSpec), else its spec.
func RunSpecOf(rec registry.Record) (*spec.Spec, error) {
	if rec.ShadowOf != "" && len(rec.ShadowSpec) > 0 {
		return decodeSpec(rec.ShadowSpec)
	}
	return decodeSpec(rec.Spec)
}

func decodeSpec(data []byte) (*spec.Spec, error) {
	var sp spec.Spec
	if err := json.Unmarshal(data, &sp); err != nil {
		return nil, fmt.Errorf("%w: stored spec: %v", spec.ErrInvalidSpec, err)
	}
	sp.EnsureDefaults()
	if err := sp.Validate(); err != nil {
		return nil, err
	}
	return &sp, nil
}
