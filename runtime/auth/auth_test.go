package auth

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/internal/subject"
)

// allows reports whether the allow list lets s through (a subject or a pattern wholly inside).
func allows(allow []string, s string) bool {
	return slices.ContainsFunc(allow, func(a string) bool { return subject.Subset(s, a) })
}

// TestForTable: what each role may publish and subscribe to, as a table of probes: the
// control plane is the admin's, reading is the reader's, a producer reaches only its
// subjects, a consumer only its own, and nobody but the runtime writes groupstate's internal
// streams, status, leases or outputs.
func TestForTable(t *testing.T) {
	type probe struct {
		pub bool // publish (else subscribe)
		s   string
		ok  bool
	}
	pub := func(s string, ok bool) probe { return probe{true, s, ok} }
	sub := func(s string, ok bool) probe { return probe{false, s, ok} }
	internal := []probe{
		pub("gs.cl.logincount.0", false), pub("gs.batches.logincount.0", false), pub("$KV.groupstate-status.logincount", false),
		pub("$KV.groupstate-leases.logincount.0", false), pub("$KV.groupstate-members.r1", false), pub("logincount.out", false),
		pub("logincount.dlq", false), pub("$SYS.REQ.SERVER.PING", false), sub("gs.>", false), sub(">", false),
	}
	for _, c := range []struct {
		role     Role
		subjects []string
		probes   []probe
	}{
		{Admin, nil, append([]probe{
			pub("$KV.groupstate-deployments.logincount", true), pub("$O.groupstate-modules.C.x", true),
			pub("$JS.API.STREAM.CREATE.X", true), pub("groupstate.api.drain.logincount", true), pub("groupstate.api.state.logincount", true),
			pub("$KV.groupstate-owners.logincount", true), sub("_INBOX.abc", true), pub("logins.web", false),
		}, internal...)},
		{Reader, nil, append([]probe{
			pub("$JS.API.STREAM.INFO.KV_groupstate-deployments", true), pub("$JS.API.CONSUMER.CREATE.KV_groupstate-deployments.abc.$KV.groupstate-deployments.>", true),
			pub("$JS.API.DIRECT.GET.KV_groupstate-status.$KV.groupstate-status.x", true), pub("groupstate.api.state.logincount", true),
			pub("groupstate.api.keys.logincount", true), pub("groupstate.api.ping.r1", true),
			pub("$KV.groupstate-deployments.logincount", false), pub("$O.groupstate-modules.C.x", false), pub("groupstate.api.drain.logincount", false),
			pub("$JS.API.STREAM.DELETE.X", false), pub("$JS.API.STREAM.PURGE.X", false), pub("$JS.API.STREAM.UPDATE.X", false),
			pub("$JS.API.CONSUMER.DELETE.X.groupstate-logincount", false), pub("$JS.API.CONSUMER.CREATE.X", false),
			pub("$JS.API.CONSUMER.DURABLE.CREATE.X.y", false), pub("$JS.ACK.X.groupstate-logincount.1.2.3.4.5", false),
			pub("$JS.API.STREAM.MSG.DELETE.X", false), pub("logins.web", false),
		}, internal...)},
		{Producer, []string{"logins.>"}, append([]probe{
			pub("logins.web", true), pub("logins.a.b", true), pub("logins", false), pub("other", false),
			pub("$JS.API.STREAM.INFO.X", false), pub("groupstate.api.state.logincount", false), sub("logins.>", false),
		}, internal...)},
		{Consumer, []string{"logincount.out"}, append([]probe{
			sub("logincount.out", true), sub("logins.>", false), sub("logincount.dlq", false),
			pub("$JS.API.CONSUMER.CREATE.LOGINCOUNT_OUT.c1.logincount.out", true),
			pub("$JS.API.CONSUMER.CREATE.LOGINS.c1.logins.web", false), pub("$JS.API.CONSUMER.CREATE.LOGINS.groupstate-logincount", false),
			pub("$JS.ACK.LOGINS.groupstate-logincount.1.2.3.4.5", false), pub("groupstate.api.state.logincount", false),
		}, internal...)},
	} {
		p, err := For(c.role, c.subjects)
		if err != nil {
			t.Fatalf("For(%s): %v", c.role, err)
		}
		for _, pr := range c.probes {
			list, what := p.Subscribe, "subscribe to"
			if pr.pub {
				list, what = p.Publish, "publish to"
			}
			if got := allows(list, pr.s); got != pr.ok {
				t.Errorf("%s may %s %s: %v, want %v", c.role, what, pr.s, got, pr.ok)
			}
		}
	}
	rt, err := For(Runtime, nil)
	if err != nil || !allows(rt.Publish, "gs.cl.x.0") || !allows(rt.Subscribe, "groupstate.api.>") {
		t.Errorf("runtime: %+v %v", rt, err)
	}
}

func TestForRefuses(t *testing.T) {
	for _, c := range []struct {
		role     Role
		subjects []string
		err      error
		msg      string
	}{
		{"root", nil, ErrUnknownRole, `unknown role "root"`},
		{Producer, nil, ErrSubjects, "needs subjects"},
		{Consumer, nil, ErrSubjects, "needs subjects"},
		{Admin, []string{"x"}, ErrSubjects, "takes no subjects"},
		{Producer, []string{"$KV.groupstate-deployments.>"}, ErrSubjects, "reserved"},
		{Producer, []string{">"}, ErrSubjects, "reserved"},
		{Consumer, []string{"gs.cl.>"}, ErrSubjects, "reserved"},
		{Consumer, []string{"a..b"}, ErrSubjects, "not a valid subject"},
	} {
		_, err := For(c.role, c.subjects)
		if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("For(%s, %v) = %v, want %v saying %q", c.role, c.subjects, err, c.err, c.msg)
		}
	}
}

func TestParseUsers(t *testing.T) {
	good := `users:
  - user: admin
    password: a-Secret-1
    role: admin
  - user: ops
    nkey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4
    role: reader
  - user: loader
    password: l-Secret-3
    role: producer
    subjects: ["logins.>"]
  - user: app
    password: c-Secret-4
    role: consumer
    subjects: ["logincount.out"]
`
	users, err := ParseUsers([]byte(good))
	if err != nil || len(users) != 4 || users[1].Nkey == "" || users[2].Subjects[0] != "logins.>" {
		t.Fatalf("ParseUsers: %+v %v", users, err)
	}
	for _, c := range []struct{ yaml, want string }{
		{"", "no users"},
		{"users: []", "no users"},
		{"users: {a: b}", "cannot unmarshal"},
		{"user: x", "field user not found"},
		{"users:\n- {user: a, password: secret-pw, role: admin, extra: 1}", "field extra not found"},
		{"users:\n- {user: 'a b', password: secret-pw, role: admin}", `user "a b" must be`},
		{"users:\n- {user: a, password: secret-pw, role: admin}\n- {user: a, password: secret-pw, role: reader}", `user "a" is listed twice`},
		{"users:\n- {user: groupstate-runtime, password: secret-pw, role: admin}", "runtime's own"},
		{"users:\n- {user: a, role: admin}", "user a: needs a password or an nkey"},
		{"users:\n- {user: a, password: short, role: admin}", "at least 8 characters"},
		{"users:\n- {user: a, password: secret-pw, nkey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4, role: admin}", "not both"},
		{"users:\n- {user: a, nkey: SUAxyz, role: admin}", "public nkey"},
		{"users:\n- {user: a, password: secret-pw, role: root}", `unknown role "root"`},
		{"users:\n- {user: a, password: secret-pw, role: runtime}", "role runtime is the runtime's own"},
		{"users:\n- {user: a, password: secret-pw, role: producer}", "needs subjects"},
		{"users:\n- {user: a, password: secret-pw, role: producer, subjects: ['$JS.API.>']}", "reserved"},
		{"users:\n- {user: a, password: secret-pw, role: reader, subjects: [x]}", "takes no subjects"},
		{strings.Repeat("#", MaxUsersFile+1), "at most"},
	} {
		_, err := ParseUsers([]byte(c.yaml))
		if !errors.Is(err, ErrUsersFile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseUsers(%.60q) = %v, want ErrUsersFile saying %q", c.yaml, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret-pw") {
			t.Errorf("ParseUsers(%.60q) repeats a password: %v", c.yaml, err)
		}
	}
}

// FuzzParseUsers: any bytes are refused with ErrUsersFile or give users that each have a
// valid role's permissions, and a refusal never repeats a password.
func FuzzParseUsers(f *testing.F) {
	f.Add([]byte("users:\n  - {user: admin, password: a-Secret-1, role: admin}\n"))
	f.Add([]byte("users:\n  - {user: app, password: c-Secret-4, role: consumer, subjects: [\"a.>\"]}\n"))
	f.Add([]byte("users: [{user: x, nkey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4, role: reader}]"))
	f.Add([]byte("users:\n  - {user: a, password: short, role: root}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		users, err := ParseUsers(data)
		if err != nil {
			if !errors.Is(err, ErrUsersFile) {
				t.Fatalf("error %v is not ErrUsersFile", err)
			}
			return
		}
		for _, u := range users {
			if _, err := For(u.Role, u.Subjects); err != nil || u.Role == Runtime {
				t.Fatalf("accepted user %+v: %v", u, err)
			}
		}
	})
}
