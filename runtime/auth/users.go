package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// User is one entry of a users file: a name with a password or an nkey, a role and, for a
// producer or consumer, its subjects.
type User struct {
	// Name is the user name clients connect with (--user); it may not be [RuntimeUser].
	Name string `yaml:"user"`
	// Password is the user's password; exactly one of Password and Nkey is set.
	Password string `yaml:"password,omitempty"`
	// Nkey is the user's public nkey ("U" followed by 55 characters of base32); the client
	// connects with the seed (--nkey).
	Nkey string `yaml:"nkey,omitempty"`
	// Role is what the user may do.
	Role Role `yaml:"role"`
	// Subjects are a producer's or a consumer's subjects.
	Subjects []string `yaml:"subjects,omitempty"`
}

// RuntimeUser is the name of the runtime's own user on the embedded server (see [Runtime]);
// no users file may name it.
const RuntimeUser = "groupstate-runtime"

// MaxUsersFile bounds the size of a users file.
const MaxUsersFile = 1 << 20

// ErrUsersFile is returned by [ParseUsers] for a file it refuses.
var ErrUsersFile = errors.New("auth: invalid users file")

var (
	userNameRE = regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,128}$`)
	nkeyRE     = regexp.MustCompile(`^U[A-Z2-7]{55}$`)
)

// ParseUsers decodes a users file (YAML: "users:", a list of [User]) and checks every entry:
// a valid unique name, a password of at least 8 characters or a user nkey (not both), a known
// role, and subjects exactly where the role takes them. It reports every problem at once,
// naming the entry; it never repeats a password.
func ParseUsers(data []byte) ([]User, error) {
	if len(data) > MaxUsersFile {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrUsersFile, len(data), MaxUsersFile)
	}
	var f struct {
		Users []User `yaml:"users"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) { // EOF: an empty file, "no users" below
		return nil, fmt.Errorf("%w: %v", ErrUsersFile, err)
	}
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if len(f.Users) == 0 {
		add("no users: list them under users:")
	}
	seen := map[string]bool{}
	for i, u := range f.Users {
		entry := fmt.Sprintf("users[%d]", i)
		switch {
		case !userNameRE.MatchString(u.Name):
			add("%s: user %q must be 1 to 128 characters of [A-Za-z0-9_.@-]", entry, u.Name)
		case u.Name == RuntimeUser:
			add("%s: user %q is the runtime's own; choose another name", entry, u.Name)
		case seen[u.Name]:
			add("%s: user %q is listed twice", entry, u.Name)
		default:
			entry = fmt.Sprintf("user %s", u.Name)
		}
		seen[u.Name] = true
		switch {
		case u.Password != "" && u.Nkey != "":
			add("%s: give a password or an nkey, not both", entry)
		case u.Password == "" && u.Nkey == "":
			add("%s: needs a password or an nkey", entry)
		case u.Nkey != "" && !nkeyRE.MatchString(u.Nkey):
			add("%s: nkey must be a user's public nkey (U followed by 55 base32 characters)", entry)
		case u.Password != "" && len(u.Password) < 8:
			add("%s: password must be at least 8 characters", entry)
		}
		if u.Role == Runtime {
			add("%s: role runtime is the runtime's own (serve makes its user); give users admin, reader, producer or consumer", entry)
			continue
		}
		if _, err := For(u.Role, u.Subjects); err != nil {
			add("%s: %s", entry, strings.TrimPrefix(strings.TrimPrefix(err.Error(), ErrSubjects.Error()+": "), "auth: "))
		}
	}
	if len(p) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrUsersFile, strings.Join(p, "; "))
	}
	return f.Users, nil
}
