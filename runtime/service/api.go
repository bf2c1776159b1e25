package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/groupstate/groupstate/runtime/internal/api"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/runner"
	"github.com/groupstate/groupstate/state"
)

// apiWorkers bounds the API requests a runtime answers at once: a flood of requests queues
// (in the subscription's pending buffer, whose limits drop the excess as a slow consumer)
// instead of starting a goroutine each.
const apiWorkers = 8

// serveAPI answers state and key listing requests for the deployments this runtime runs, and
// pings addressed to this runtime's ID, on a subscription of their own, so that a flood of
// other requests never delays the answer peers take for being alive. Only a runtime that
// runs the deployment answers (a queue group per deployment would be wrong: each runtime has
// its own state). stop unsubscribes and waits for the answers in progress.
func (s *Service) serveAPI() (stop func(), err error) {
	ping, err := s.cfg.Conn.Subscribe(api.Subject(api.VerbPing, s.id), func(m *nats.Msg) {
		_ = m.Respond([]byte("{}"))
	})
	if err != nil {
		return nil, err
	}
	purge, err := s.cfg.Conn.Subscribe(api.Subject(api.VerbPurge, s.id), func(m *nats.Msg) {
		reply, err := s.purgeState(m.Data)
		if err != nil {
			respond(m, api.Error{Error: err.Error()}, 0)
			return
		}
		respond(m, reply, 0)
	})
	if err != nil {
		_ = ping.Unsubscribe()
		return nil, err
	}
	slots := make(chan struct{}, apiWorkers)
	var answering sync.WaitGroup
	var stopping sync.Mutex // orders the last answer's start before stop's wait
	stopped := false
	sub, err := s.cfg.Conn.Subscribe(api.Prefix+">", func(m *nats.Msg) {
		verb, name, ok := strings.Cut(strings.TrimPrefix(m.Subject, api.Prefix), ".")
		if !ok || verb == api.VerbPing || verb == api.VerbPurge {
			return // pings and purges have their own subscriptions
		}
		s.mu.Lock()
		r, running := s.runners[name]
		st := s.store
		s.mu.Unlock()
		if !running || st == nil {
			return // another runtime may run it; no reply means none does
		}
		if verb == api.VerbDrain {
			go respondDrain(m, r) // the drain batch may take long; other requests go on
			return
		}
		slots <- struct{}{} // at most apiWorkers at once; the subscription waits meanwhile
		stopping.Lock()
		if stopped {
			stopping.Unlock()
			<-slots
			return
		}
		answering.Add(1)
		stopping.Unlock()
		go func() {
			defer func() { <-slots; answering.Done() }()
			reply, err := answer(st.Deployment(name), verb, m.Data, s.cfg.Clock.Now().UnixMilli())
			if err != nil {
				reply = api.Error{Error: err.Error()}
			}
			respond(m, reply, s.cfg.Conn.MaxPayload())
		}()
	})
	if err != nil {
		_ = ping.Unsubscribe()
		_ = purge.Unsubscribe()
		return nil, err
	}
	return func() {
		_ = ping.Unsubscribe()
		_ = purge.Unsubscribe()
		_ = sub.Unsubscribe()
		stopping.Lock()
		stopped = true
		stopping.Unlock()
		answering.Wait()
	}, nil
}

// purgeState answers a purge request (api.VerbPurge, undeploy --purge): it deletes every
// keyspace of the deployment named in data that this runtime's store holds (the
// deployment's, or its partitions'), and says which. A deployment that is deployed, or that
// this runtime still runs, starts or keeps a standby copy of, is refused: purge undeploys
// first and waits until the runtimes stopped it.
func (s *Service) purgeState(data []byte) (api.PurgeReply, error) {
	var req api.PurgeRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return api.PurgeReply{}, err
	}
	name := req.Deployment
	if err := state.ValidateName(name); err != nil || strings.Contains(name, ".") {
		return api.PurgeReply{}, fmt.Errorf("%q is not a deployment name", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.reg.Get(ctx, name); err == nil || errors.Is(err, registry.ErrBadRecord) {
		return api.PurgeReply{}, fmt.Errorf("%s is deployed: undeploy it first", name)
	} else if !errors.Is(err, registry.ErrNotFound) {
		return api.PurgeReply{}, err
	}
	s.mu.Lock()
	busy := false
	for _, r := range s.runners {
		busy = busy || r.Name() == name
	}
	for _, sb := range s.standbys {
		busy = busy || sb.name == name
	}
	for key := range s.starting {
		base, _, _ := strings.Cut(key, ".")
		busy = busy || base == name
	}
	for key := range s.ensured {
		// Set while a runner here runs a revision, cleared once undeploy stopped them all
		// (a runner leaves s.runners before its stop is done).
		busy = busy || strings.HasPrefix(key, name+"@")
	}
	st := s.store
	s.mu.Unlock()
	if busy {
		return api.PurgeReply{}, fmt.Errorf("runtime %s still runs %s; try again once it stopped", s.id, name)
	}
	if st == nil {
		return api.PurgeReply{}, fmt.Errorf("runtime %s has no state store open", s.id)
	}
	keyspaces, err := st.Deployments()
	if err != nil {
		return api.PurgeReply{}, err
	}
	reply := api.PurgeReply{Dropped: []string{}}
	for _, key := range keyspaces {
		if base, _, _ := strings.Cut(key, "."); base != name {
			continue
		}
		if err := st.Deployment(key).Drop(); err != nil {
			return reply, err
		}
		reply.Dropped = append(reply.Dropped, key)
	}
	if len(reply.Dropped) > 0 {
		s.logger.Warn("deployment state deleted (undeploy --purge)", "deployment", name, "keyspaces", reply.Dropped)
	}
	return reply, nil
}

// respond replies to m with reply as JSON, or, when that is larger than the server's
// max_payload (a page of large keys), with an error that says so: the request gets an answer
// either way.
func respond(m *nats.Msg, reply any, maxPayload int64) {
	data, _ := json.Marshal(reply)
	if maxPayload > 0 && int64(len(data)) > maxPayload-1024 { // room for the reply's headers
		data, _ = json.Marshal(api.Error{Error: fmt.Sprintf("the reply is %d bytes, above the NATS server's max_payload of %d: ask for fewer keys a page", len(data), maxPayload)})
	}
	_ = m.Respond(data)
}

// respondDrain answers a drain request once r's loop ran the drain batch (or could not),
// within drainWait.
func respondDrain(m *nats.Msg, r *runner.Runner) {
	ctx, cancel := context.WithTimeout(context.Background(), drainWait)
	defer cancel()
	var reply any
	rep, err := r.RequestDrain(ctx)
	if err != nil {
		reply = api.Error{Error: err.Error()}
	} else {
		reply = api.DrainReply{BatchID: rep.BatchID, TimeoutCalls: rep.TimeoutCalls, Emitted: rep.Emitted}
	}
	data, _ := json.Marshal(reply)
	_ = m.Respond(data)
}

// drainWait bounds how long a drain request waits for the loop's drain batch: the batch in
// flight first, then the drain batch, whose timeout calls commit in chunks if they are many.
const drainWait = 2 * time.Minute

// answer answers a state or keys request about d. For an ABI v2 (transformWithState)
// deployment, whose keys hold variables and timers rather than one value, a key's value is
// the object of its variables with content at the runtime's processing time nowMs (expired
// TTL items left out; see varsKeyState).
func answer(d *state.Deployment, verb string, data []byte, nowMs int64) (any, error) {
	vars, err := d.Vars()
	if err != nil {
		return nil, err
	}
	v2 := vars.Len() > 0
	switch verb {
	case api.VerbState:
		var req api.StateRequest
		if err := json.Unmarshal(data, &req); err != nil {
			return nil, err
		}
		if v2 {
			ks, err := varsKeyState(d, req.Key, nowMs)
			if err != nil || (!ks.HasValue && len(ks.Timers) == 0) {
				return api.StateReply{}, err
			}
			return api.StateReply{Found: true, KeyState: ks}, nil
		}
		e, found, err := d.Get(req.Key)
		if err != nil || !found {
			return api.StateReply{}, err
		}
		return api.StateReply{Found: true, KeyState: keyState(req.Key, e)}, nil
	case api.VerbKeys:
		var req api.KeysRequest
		if err := json.Unmarshal(data, &req); err != nil {
			return nil, err
		}
		if req.Limit <= 0 || req.Limit > api.MaxKeysLimit {
			req.Limit = api.DefaultKeysLimit
		}
		after := []byte(req.After)
		if len(after) == 0 {
			after = nil
		}
		reply := api.KeysReply{Keys: []api.KeyState{}}
		if v2 {
			err = varsKeys(d, after, req.Limit, nowMs, &reply)
		} else {
			err = d.Keys(after, req.Limit, func(key []byte, e state.Entry) error {
				reply.Keys = append(reply.Keys, keyState(append([]byte(nil), key...), e))
				return nil
			})
		}
		if len(reply.Keys) == req.Limit {
			reply.Next = reply.Keys[len(reply.Keys)-1].Key
		}
		return reply, err
	}
	return nil, errors.New("unknown request " + verb)
}

func keyState(key []byte, e state.Entry) api.KeyState {
	ks := api.KeyState{Key: json.RawMessage(key), HasValue: e.HasValue, TimeoutMs: e.TimeoutMs, UpdatedMs: e.UpdatedMs}
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

// varsKeys adds to reply up to limit keys of an ABI v2 deployment after after, with their
// variables (varsKeyState): the keys are listed first, then read, each from its own snapshot.
func varsKeys(d *state.Deployment, after []byte, limit int, nowMs int64, reply *api.KeysReply) error {
	var keys [][]byte
	err := d.VarKeys(after, limit, func(key []byte, _, _ int) error {
		keys = append(keys, append([]byte(nil), key...))
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		ks, err := varsKeyState(d, k, nowMs)
		if err != nil {
			return err
		}
		reply.Keys = append(reply.Keys, ks)
	}
	return nil
}

// varsKeyState is the api.KeyState of an ABI v2 key: its variables with content as one JSON
// object, in declaration order, and its timers.
func varsKeyState(d *state.Deployment, key []byte, nowMs int64) (api.KeyState, error) {
	st, err := d.KeyVars(key, nowMs)
	if err != nil {
		return api.KeyState{}, err
	}
	ks := api.KeyState{Key: json.RawMessage(key), Timers: st.Timers}
	var obj bytes.Buffer
	obj.WriteByte('{')
	for _, v := range st.Vars {
		var val []byte
		switch v.Decl.Kind {
		case state.VarValue:
			if !v.HasValue {
				continue
			}
			val = jsonOrString(v.Value)
		case state.VarList:
			if len(v.Elements) == 0 {
				continue
			}
			val = appendJoined(nil, '[', ']', len(v.Elements), func(dst []byte, i int) []byte {
				return append(dst, jsonOrString(v.Elements[i])...)
			})
		case state.VarMap:
			if len(v.Entries) == 0 {
				continue
			}
			val = appendJoined(nil, '{', '}', len(v.Entries), func(dst []byte, i int) []byte {
				name, _ := json.Marshal(string(v.Entries[i].Key))
				return append(append(append(dst, name...), ':'), jsonOrString(v.Entries[i].Value)...)
			})
		}
		if ks.HasValue {
			obj.WriteByte(',')
		}
		name, _ := json.Marshal(v.Decl.Name)
		obj.Write(name)
		obj.WriteByte(':')
		obj.Write(val)
		ks.HasValue = true
	}
	obj.WriteByte('}')
	if ks.HasValue {
		ks.Value = obj.Bytes()
	}
	return ks, nil
}

// jsonOrString returns v when it is JSON, else v as a JSON string (a raw handler's bytes).
func jsonOrString(v []byte) []byte {
	if json.Valid(v) {
		return v
	}
	s, _ := json.Marshal(string(v))
	return s
}

// appendJoined appends open, item(0) to item(n-1) separated by commas, and close to dst.
func appendJoined(dst []byte, open, close byte, n int, item func(dst []byte, i int) []byte) []byte {
	dst = append(dst, open)
	for i := range n {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = item(dst, i)
	}
	return append(dst, close)
}
