// Package subject knows NATS subject syntax: which strings are subjects and patterns, and
// which patterns match which subjects. It depends on nothing, so the spec can validate
// subjects without linking NATS.
package subject

import (
	"fmt"
	"strings"
)

// CheckPattern returns nil when s is a valid subject or wildcard pattern: tokens separated by
// '.', none empty, no whitespace, '*' and '>' only as whole tokens, '>' only last.
func CheckPattern(s string) error { return check(s, true) }

// CheckLiteral returns nil when s is a valid subject to publish to: a pattern without
// wildcards.
func CheckLiteral(s string) error { return check(s, false) }

func check(s string, wildcards bool) error {
	if s == "" {
		return fmt.Errorf("is empty")
	}
	if strings.ContainsAny(s, " \t\r\n\f\v\x00") {
		return fmt.Errorf("contains whitespace")
	}
	tokens := strings.Split(s, ".")
	for i, t := range tokens {
		switch {
		case t == "":
			return fmt.Errorf("has an empty token")
		case t == "*" || t == ">":
			if !wildcards {
				return fmt.Errorf("has the wildcard %q (outputs are published to one subject)", t)
			}
			if t == ">" && i != len(tokens)-1 {
				return fmt.Errorf("has '>' before its last token")
			}
		case strings.ContainsAny(t, "*>"):
			return fmt.Errorf("has %q in token %q (wildcards must be whole tokens)", "*>", t)
		}
	}
	return nil
}

// Subset reports whether every subject matched by sub is matched by pattern
// ("a.b" ⊆ "a.*" ⊆ "a.>"). A literal sub is a subset exactly when pattern matches it.
func Subset(sub, pattern string) bool {
	st := strings.Split(sub, ".")
	pt := strings.Split(pattern, ".")
	for i, p := range pt {
		if p == ">" {
			return len(st) > i
		}
		if i >= len(st) {
			return false
		}
		s := st[i]
		switch {
		case p == "*":
			if s == ">" {
				return false
			}
		case s != p:
			return false
		}
	}
	return len(st) == len(pt)
}

// Captured reports whether sub is a subset of one of patterns.
func Captured(sub string, patterns []string) bool {
	for _, p := range patterns {
		if Subset(sub, p) {
			return true
		}
	}
	return false
}

// Overlap reports whether some subject is matched by both patterns a and b ("a.*.c" and
// "a.b.>" overlap on "a.b.c"; "a.b" and "a.c" do not).
func Overlap(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		switch {
		case i == len(at) || i == len(bt):
			return len(at) == len(bt)
		case at[i] == ">" || bt[i] == ">":
			return true // the other has a token here, and '>' takes it and what follows
		case at[i] != "*" && bt[i] != "*" && at[i] != bt[i]:
			return false
		}
	}
}

// ReservedPrefixes are the subject namespaces that NATS and groupstate keep for themselves:
// JetStream's API, KV and object stores ("$JS.", "$KV.", "$O.", every "$"-prefixed subject),
// request replies ("_INBOX."), groupstate's internal streams ("gs.") and its control plane
// ("groupstate."). A deployment's spec may name none of them.
var ReservedPrefixes = []string{"$", "_INBOX.", "gs.", "groupstate."}

// Reserved reports whether the valid subject or pattern s can match a subject in one of
// [ReservedPrefixes], and why: the prefix it names, or, for a first token '*' or '>', that it
// matches every namespace. A pattern that only overlaps a reserved namespace is reserved too:
// a stream or subscription on "*.x" would capture "gs.x".
func Reserved(s string) (why string, reserved bool) {
	first, _, _ := strings.Cut(s, ".")
	switch {
	case first == "*" || first == ">":
		return fmt.Sprintf("its first token %q matches the reserved namespaces too", first), true
	case strings.HasPrefix(first, "$"):
		return `"$"-prefixed subjects belong to NATS (JetStream, KV, object stores, the system account)`, true
	}
	for _, p := range ReservedPrefixes[1:] {
		if first == strings.TrimSuffix(p, ".") {
			return fmt.Sprintf("%q subjects belong to %s", p, reservedOwner[p]), true
		}
	}
	return "", false
}

var reservedOwner = map[string]string{
	"_INBOX.":     "request replies",
	"gs.":         "groupstate's internal streams",
	"groupstate.": "groupstate's control plane",
}
