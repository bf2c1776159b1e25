package service

import (
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
)

// ConnOptions says how to reach NATS: URL, credentials (a creds file, an nkey seed file,
// user and password, or a token) and TLS (CA, client certificate and key).
type ConnOptions = natsio.ConnOptions

// Connect connects to NATS, reconnecting forever after a disconnect.
func Connect(opts ConnOptions) (*nats.Conn, error) { return natsio.Connect(opts) }

// DefaultURL is $NATS_URL, else nats://127.0.0.1:4222.
func DefaultURL() string { return natsio.DefaultURL() }

// EmbeddedOptions configures the embedded NATS server of `groupstate serve`.
type EmbeddedOptions = natsio.ServerOptions

// StartEmbedded starts a NATS server with JetStream in-process (storage under DataDir,
// listening on loopback unless told otherwise) and waits until it accepts connections. The
// caller shuts it down.
func StartEmbedded(opts EmbeddedOptions) (*server.Server, error) { return natsio.StartServer(opts) }

// Header names on the messages the service publishes: every output, dead letter and late
// row carries HeaderDeployment, HeaderKey (when it has a key) and HeaderBatch, and the
// Nats-Msg-Id that makes redeliveries duplicates; dead letters and late rows add
// HeaderReason (one of the engine's Reason constants, or "too_large_to_publish"),
// HeaderError, and HeaderSubject and HeaderSequence of the input row; the dead letter of a
// failed timeout call has HeaderTimeoutCall "true".
const (
	HeaderDeployment  = natsio.HeaderDeployment
	HeaderKey         = natsio.HeaderKey
	HeaderBatch       = natsio.HeaderBatch
	HeaderReason      = natsio.HeaderReason
	HeaderError       = natsio.HeaderError
	HeaderSubject     = natsio.HeaderSubject
	HeaderSequence    = natsio.HeaderSequence
	HeaderTimeoutCall = natsio.HeaderTimeoutCall
)
