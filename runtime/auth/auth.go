// Package auth says who may do what on the NATS that groupstate uses: the roles (admin,
// reader, producer, consumer, runtime), the NATS permissions (publish and subscribe allow
// lists) that carry each role out, and the users file of `groupstate serve --auth`.
//
// NATS authorises by subject, so a role is a set of subjects: groupstate's control plane is
// KV and object-store writes ("$KV.groupstate-deployments.>", "$O.groupstate-modules.>"),
// JetStream API requests ("$JS.API.>") and its own request-reply API ("groupstate.api.>");
// its internal streams ("gs.>"), status, leases and membership are written by the runtime
// alone. The same permissions serve the embedded server (serve --auth) and an external one,
// whose operator gives each user the lists [For] returns (`groupstate auth permissions`).
//
// The package imports no NATS: it is a table and a parser, tested alone.
package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/groupstate/groupstate/runtime/internal/subject"
)

// Role is what a user may do.
type Role string

// The roles.
const (
	// Admin may run every command: deploy, undeploy, promote, reset, drain, replay, diff,
	// list, status, state.
	Admin Role = "admin"
	// Reader may run what changes no deployment: list, status, state, replay, diff.
	Reader Role = "reader"
	// Producer may publish (core NATS and JetStream) to its subjects, and nothing else.
	Producer Role = "producer"
	// Consumer may subscribe to its subjects and read the streams that keep them.
	Consumer Role = "consumer"
	// Runtime is groupstate's own: a `groupstate serve` process connecting to an external
	// server. It may publish and subscribe everywhere (it creates streams, publishes outputs
	// on any subject a spec names, and answers the API). The embedded server makes its own
	// runtime user; a users file has no entry for it.
	Runtime Role = "runtime"
)

// Roles lists the roles, in the order the documentation gives them.
var Roles = []Role{Admin, Reader, Producer, Consumer, Runtime}

// Errors of the package.
var (
	// ErrUnknownRole is returned for a role that is not one of [Roles].
	ErrUnknownRole = errors.New("auth: unknown role")
	// ErrSubjects is returned when a role's subjects are missing, not allowed or invalid.
	ErrSubjects = errors.New("auth: bad subjects")
)

// Permissions are a user's NATS permissions: the subjects it may publish to and subscribe
// to (allow lists; anything not allowed is denied), as a NATS server configuration or
// nats-server's server.Permissions take them.
type Permissions struct {
	Publish   []string `json:"publish"`
	Subscribe []string `json:"subscribe"`
}

// Replies is what every client subscribes to for the replies to its requests (nats.go's and
// the nats CLI's default inbox prefix).
const Replies = "_INBOX.>"

// jsRead are the JetStream API requests that read a stream: account and stream info,
// messages by sequence or subject (direct or through the leader), and consumers made for
// reading (named, so the name is in the subject and a request cannot carry another name in
// its body). Reading through a consumer needs no acknowledgement: readers use consumers with
// AckNone, so "$JS.ACK.>" is not theirs (an acknowledgement could ack a runtime's input).
var jsRead = []string{
	"$JS.API.INFO",
	"$JS.API.STREAM.INFO.*",
	"$JS.API.STREAM.NAMES",
	"$JS.API.STREAM.LIST",
	"$JS.API.STREAM.MSG.GET.*",
	"$JS.API.DIRECT.GET.>",
	"$JS.API.CONSUMER.INFO.*.*",
	"$JS.API.CONSUMER.NAMES.*",
	"$JS.API.CONSUMER.LIST.*",
	"$JS.API.CONSUMER.CREATE.*.*",
	"$JS.API.CONSUMER.CREATE.*.*.>",
	"$JS.API.CONSUMER.MSG.NEXT.*.*",
	"$JS.FC.>",
}

// UserInfo is where a NATS server tells a connection who it is and what it may do; every
// role may ask, so that a command refused by a role says so at once, naming the user.
const UserInfo = "$SYS.REQ.USER.INFO"

// readAPI are the verbs of groupstate's request-reply API that change nothing.
var readAPI = []string{"groupstate.api.state.>", "groupstate.api.keys.>", "groupstate.api.ping.>"}

// For returns the permissions of role; subjects are a producer's or consumer's subjects
// (required for them, refused for the other roles). A subject may be a wildcard pattern but
// not a reserved one (see subject.Reserved): a producer of "$KV.>" would write the registry.
func For(role Role, subjects []string) (Permissions, error) {
	if !slices.Contains(Roles, role) {
		return Permissions{}, fmt.Errorf("%w %q: the roles are %s", ErrUnknownRole, role, roleList())
	}
	takesSubjects := role == Producer || role == Consumer
	switch {
	case takesSubjects && len(subjects) == 0:
		return Permissions{}, fmt.Errorf("%w: role %s needs subjects (the subjects it may %s)", ErrSubjects, role, map[Role]string{Producer: "publish to", Consumer: "subscribe to"}[role])
	case !takesSubjects && len(subjects) > 0:
		return Permissions{}, fmt.Errorf("%w: role %s takes no subjects", ErrSubjects, role)
	}
	for _, s := range subjects {
		if err := subject.CheckPattern(s); err != nil {
			return Permissions{}, fmt.Errorf("%w: %q is not a valid subject: it %v", ErrSubjects, s, err)
		}
		if why, reserved := subject.Reserved(s); reserved {
			return Permissions{}, fmt.Errorf("%w: %q is reserved: %s", ErrSubjects, s, why)
		}
	}
	var p Permissions
	switch role {
	case Runtime:
		p = Permissions{Publish: []string{">"}, Subscribe: []string{">"}}
	case Admin:
		p.Publish = []string{
			"$JS.API.>", "$JS.ACK.>", "$JS.FC.>",
			"$KV.groupstate-deployments.>", // deploy, undeploy, promote, reset
			"$KV.groupstate-owners.>",      // undeploy frees the deployment's owner
			"$O.groupstate-modules.>",      // modules and initial-state files
			"groupstate.api.>",
		}
		p.Subscribe = []string{Replies}
	case Reader:
		p.Publish = slices.Concat(jsRead, readAPI)
		p.Subscribe = []string{Replies}
	case Producer:
		p.Publish = slices.Concat([]string{"$JS.API.INFO"}, subjects)
		p.Subscribe = []string{Replies}
	case Consumer:
		p.Publish = []string{"$JS.API.INFO", "$JS.API.STREAM.INFO.*", "$JS.API.STREAM.NAMES", "$JS.FC.>",
			"$JS.API.CONSUMER.MSG.NEXT.*.*", "$JS.API.CONSUMER.INFO.*.*"}
		for _, s := range subjects {
			// Only consumers filtered to the user's subjects: the filter is in the subject.
			p.Publish = append(p.Publish, "$JS.API.CONSUMER.CREATE.*.*."+s)
		}
		p.Subscribe = slices.Concat([]string{Replies}, subjects)
	}
	if role != Runtime {
		p.Publish = append(p.Publish, UserInfo)
	}
	return p, nil
}

func roleList() string {
	s := make([]string, len(Roles))
	for i, r := range Roles {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}
