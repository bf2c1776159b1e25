package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/groupstate/groupstate/runtime/internal/api"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/subject"
)

// ErrPermissionDenied is returned for an operation the connection's user may not do (see
// package auth for the roles); the message names the user, the operation and the subject.
var ErrPermissionDenied = errors.New("permission denied")

// userInfoSubject is where a NATS server (2.10 and later) tells a connection who it is and
// what it may do.
const userInfoSubject = "$SYS.REQ.USER.INFO"

// userInfoTimeout bounds the question; a server that does not answer is not asked again.
const userInfoTimeout = 2 * time.Second

// permissions is the connection's user and permissions as its server reports them, asked
// once per client. known is false when the server did not say (an old server, one that does
// not let the user ask): then nothing is checked here and the server's own refusal stands.
type permissions struct {
	once     sync.Once
	known    bool
	user     string
	pub, sub subjectRules
}

// subjectRules are allow and deny lists of subject patterns (an empty allow list allows
// everything not denied).
type subjectRules struct {
	Allow []string `json:"allow"`
	Deny  []string `json:"deny"`
}

func (r subjectRules) permits(s string) bool {
	for _, d := range r.Deny {
		if subject.Subset(s, d) {
			return false
		}
	}
	if len(r.Allow) == 0 {
		return true
	}
	for _, a := range r.Allow {
		if subject.Subset(s, a) {
			return true
		}
	}
	return false
}

// load asks the server once.
func (p *permissions) load(ctx context.Context, nc *nats.Conn) {
	p.once.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, userInfoTimeout)
		defer cancel()
		msg, err := nc.RequestWithContext(ctx, userInfoSubject, nil)
		if err != nil {
			return
		}
		var reply struct {
			Data *struct {
				User        string `json:"user"`
				Permissions *struct {
					Publish   *subjectRules `json:"publish"`
					Subscribe *subjectRules `json:"subscribe"`
				} `json:"permissions"`
			} `json:"data"`
		}
		if json.Unmarshal(msg.Data, &reply) != nil || reply.Data == nil {
			return
		}
		p.known, p.user = true, reply.Data.User
		if perms := reply.Data.Permissions; perms != nil {
			if perms.Publish != nil {
				p.pub = *perms.Publish
			}
			if perms.Subscribe != nil {
				p.sub = *perms.Subscribe
			}
		}
	})
}

// may returns [ErrPermissionDenied], naming the user and op, when the connection's user may
// not publish to subj (the request op needs); nil when it may or when the server did not say.
func (c *Client) may(ctx context.Context, op, subj string) error {
	c.perms.load(ctx, c.nc)
	if !c.perms.known || c.perms.pub.permits(subj) {
		return nil
	}
	return fmt.Errorf("%w: user %s may not %s (publishing to %s is not allowed for this user)", ErrPermissionDenied, c.perms.user, op, subj)
}

// CheckPermission returns [ErrPermissionDenied], naming the user and op, when the user of
// nc may not publish to subject (publish true) or subscribe to it; nil when it may or when
// the server does not say (its own refusal then stands). For commands that use a connection
// without a Client (publishing rows, reading a subject), so that they fail at once instead of
// waiting for an answer that the server's permissions hold back.
func CheckPermission(ctx context.Context, nc *nats.Conn, op, subject string, publish bool) error {
	var p permissions
	p.load(ctx, nc)
	rules, verb := p.sub, "subscribing to"
	if publish {
		rules, verb = p.pub, "publishing to"
	}
	if !p.known || rules.permits(subject) {
		return nil
	}
	return fmt.Errorf("%w: user %s may not %s (%s %s is not allowed for this user)", ErrPermissionDenied, p.user, op, verb, subject)
}

// mayChange is may for an operation that writes deployment name's record.
func (c *Client) mayChange(ctx context.Context, op, name string) error {
	return c.may(ctx, op, "$KV."+registry.DeploymentsBucket+"."+name)
}

// mayRead is may for an operation that reads the deployments.
func (c *Client) mayRead(ctx context.Context, op string) error {
	return c.may(ctx, op, "$JS.API.STREAM.INFO.KV_"+registry.DeploymentsBucket)
}

// mayAsk is may for a request of the runtimes' API.
func (c *Client) mayAsk(ctx context.Context, op, verb, unit string) error {
	return c.may(ctx, op, api.Subject(verb, unit))
}
