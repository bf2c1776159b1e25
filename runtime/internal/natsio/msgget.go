package natsio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// APIPrefix is the JetStream API prefix js sends its requests with, ending with '.':
// "$JS.<domain>.API." with a domain, else js's API prefix, else [jetstream.DefaultAPIPrefix].
func APIPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	default:
		return jetstream.DefaultAPIPrefix
	}
}

// MsgGetRequest is the body of a JetStream message get, on the stream API ([LeaderGet]) or
// a direct get (Batch and MaxBytes are for direct gets only).
type MsgGetRequest struct {
	// Seq is the sequence to get, or with NextFor the first sequence to look at.
	Seq uint64 `json:"seq,omitempty"`
	// LastFor asks for the last message of this subject.
	LastFor string `json:"last_by_subj,omitempty"`
	// NextFor asks for the first message of this subject at or after Seq.
	NextFor string `json:"next_by_subj,omitempty"`
	// Batch asks a direct get for up to this many messages.
	Batch int `json:"batch,omitempty"`
	// MaxBytes bounds the bytes of a direct get's batch.
	MaxBytes int `json:"max_bytes,omitempty"`
}

// StoredMsg is one message of a stream as a message get returns it.
type StoredMsg struct {
	// Sequence is the message's stream sequence.
	Sequence uint64
	// Header is its headers (nil when it has none).
	Header nats.Header
	// Data is its payload.
	Data []byte
}

// errCodeMessageNotFound is the server's JSNoMessageFoundErr.
const errCodeMessageNotFound jetstream.ErrorCode = 10037

// LeaderGet gets one message of stream with the stream API: it is answered by the stream's
// leader, never by a replica that may lag (unlike a direct get). found is false when there
// is no such message. Without a deadline on ctx, the request is bounded by js's default
// timeout. Safe for concurrent use.
func LeaderGet(ctx context.Context, js jetstream.JetStream, stream string, req MsgGetRequest) (m StoredMsg, found bool, err error) {
	body, _ := json.Marshal(req)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, js.Options().DefaultTimeout)
		defer cancel()
	}
	resp, err := js.Conn().RequestWithContext(ctx, APIPrefix(js)+"STREAM.MSG.GET."+stream, body)
	if err != nil {
		return StoredMsg{}, false, err
	}
	var r struct {
		Error   *jetstream.APIError `json:"error,omitempty"`
		Message *struct {
			Seq    uint64 `json:"seq"`
			Header []byte `json:"hdrs,omitempty"`
			Data   []byte `json:"data,omitempty"`
		} `json:"message,omitempty"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return StoredMsg{}, false, fmt.Errorf("natsio: message get response: %w", err)
	}
	if r.Error != nil {
		if r.Error.ErrorCode == errCodeMessageNotFound {
			return StoredMsg{}, false, nil
		}
		return StoredMsg{}, false, r.Error
	}
	if r.Message == nil {
		return StoredMsg{}, false, errors.New("natsio: message get response without a message")
	}
	m = StoredMsg{Sequence: r.Message.Seq, Data: r.Message.Data}
	if len(r.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(r.Message.Header); err != nil {
			return StoredMsg{}, false, fmt.Errorf("natsio: message %d headers: %w", m.Sequence, err)
		}
	}
	return m, true, nil
}
