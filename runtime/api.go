package runtime

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/groupstate/groupstate/state"
)

// The runtime answers questions about its deployments on NATS request-reply subjects
// groupstate.api.<verb>.<deployment>; requests and replies are JSON.
const apiPrefix = "groupstate.api."

func apiSubject(verb, deployment string) string { return apiPrefix + verb + "." + deployment }

type apiStateRequest struct {
	Key json.RawMessage `json:"key"`
}

type apiStateReply struct {
	Found bool `json:"found"`
	KeyState
}

type apiKeysRequest struct {
	After json.RawMessage `json:"after,omitempty"`
	Limit int             `json:"limit"`
}

type apiKeysReply struct {
	Keys []KeyState      `json:"keys"`
	Next json.RawMessage `json:"next,omitempty"`
}

type apiError struct {
	Error       string `json:"error"`
	NotDeployed bool   `json:"not_deployed,omitempty"`
}

// serveAPI answers state and key listing requests for the deployments this runtime runs.
// Only a runtime that runs the deployment answers (a queue group per deployment would be
// wrong: each runtime has its own state).
func (s *Service) serveAPI() (*nats.Subscription, error) {
	return s.cfg.Conn.Subscribe(apiPrefix+">", func(m *nats.Msg) {
		verb, name, ok := strings.Cut(strings.TrimPrefix(m.Subject, apiPrefix), ".")
		if !ok {
			return
		}
		s.mu.Lock()
		_, running := s.runners[name]
		st := s.store
		s.mu.Unlock()
		if !running || st == nil {
			return // another runtime may run it; no reply means none does
		}
		reply, err := s.answer(st.Deployment(name), verb, m.Data)
		if err != nil {
			reply = apiError{Error: err.Error()}
		}
		data, _ := json.Marshal(reply)
		_ = m.Respond(data)
	})
}

func (s *Service) answer(d *state.Deployment, verb string, data []byte) (any, error) {
	switch verb {
	case "state":
		var req apiStateRequest
		if err := json.Unmarshal(data, &req); err != nil {
			return nil, err
		}
		e, found, err := d.Get(req.Key)
		if err != nil || !found {
			return apiStateReply{}, err
		}
		return apiStateReply{Found: true, KeyState: keyState(req.Key, e)}, nil
	case "keys":
		var req apiKeysRequest
		if err := json.Unmarshal(data, &req); err != nil {
			return nil, err
		}
		if req.Limit <= 0 || req.Limit > 10000 {
			req.Limit = 1000
		}
		var reply apiKeysReply
		reply.Keys = []KeyState{}
		after := []byte(req.After)
		if len(after) == 0 {
			after = nil
		}
		err := d.Keys(after, req.Limit, func(key []byte, e state.Entry) error {
			reply.Keys = append(reply.Keys, keyState(append([]byte(nil), key...), e))
			return nil
		})
		if len(reply.Keys) == req.Limit {
			reply.Next = reply.Keys[len(reply.Keys)-1].Key
		}
		return reply, err
	}
	return nil, errors.New("unknown request " + verb)
}

func keyState(key []byte, e state.Entry) KeyState {
	ks := KeyState{Key: json.RawMessage(key), HasValue: e.HasValue, TimeoutMs: e.TimeoutMs, UpdatedMs: e.UpdatedMs}
	if e.HasValue {
		v := append([]byte(nil), e.Value...)
		if json.Valid(v) {
			ks.Value = v
		} else {
			ks.Value, _ = json.Marshal(string(v)) // a raw handler's non-JSON state, as a string
		}
	}
	return ks
}
