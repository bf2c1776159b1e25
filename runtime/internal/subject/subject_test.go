package subject

import "testing"

func TestSubset(t *testing.T) {
	for _, c := range []struct {
		sub, pat string
		want     bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.*", true},
		{"a.b.c", "a.>", true},
		{"a", "a.>", false},
		{"a.*", "a.>", true},
		{"a.>", "a.*", false},
		{"a.>", "a.>", true},
		{"a.b", "a.c", false},
		{"a.b.c", "a.*", false},
		{"*.b", "a.b", false},
	} {
		if got := Subset(c.sub, c.pat); got != c.want {
			t.Errorf("Subset(%q, %q) = %v", c.sub, c.pat, got)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		s                    string
		patternOK, literalOK bool
	}{
		{"orders", true, true},
		{"orders.eu.new", true, true},
		{"orders.>", true, false},
		{"orders.*.new", true, false},
		{"*", true, false},
		{">", true, false},
		{"", false, false},
		{"orders..new", false, false},
		{".orders", false, false},
		{"orders.", false, false},
		{"orders.>.new", false, false},
		{"orders.a*", false, false},
		{"orders.>x", false, false},
		{"orders new", false, false},
		{"orders\tnew", false, false},
	} {
		if err := CheckPattern(c.s); (err == nil) != c.patternOK {
			t.Errorf("CheckPattern(%q) = %v, want ok %v", c.s, err, c.patternOK)
		}
		if err := CheckLiteral(c.s); (err == nil) != c.literalOK {
			t.Errorf("CheckLiteral(%q) = %v, want ok %v", c.s, err, c.literalOK)
		}
	}
}

func TestOverlap(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*.c", "a.b.>", true},
		{"a.*", "a.b.c", false},
		{"a.>", "a", false},
		{"a.>", "a.b.c", true},
		{">", "x", true},
		{"ads.impressions.>", "ads.clicks.>", false},
		{"ads.*.x", "ads.clicks.y", false},
		{"*.b", "a.*", true},
	} {
		if got := Overlap(c.a, c.b); got != c.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := Overlap(c.b, c.a); got != c.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", c.b, c.a, got, c.want)
		}
	}
}

func TestReserved(t *testing.T) {
	for _, c := range []struct {
		s        string
		reserved bool
	}{
		{"logins", false},
		{"logins.>", false},
		{"a.*.c", false},
		{"gsx.in", false},
		{"groupstates.x", false},
		{"inbox.x", false},
		{"x.$KV.y", false},
		{"$KV.groupstate-deployments.pwned", true},
		{"$JS.API.STREAM.CREATE.X", true},
		{"$O.groupstate-modules.C.x", true},
		{"$SYS.REQ.SERVER.PING", true},
		{"$G", true},
		{"_INBOX.abc", true},
		{"_INBOX", true},
		{"gs.changelog.x.0", true},
		{"gs", true},
		{"groupstate.api.state.x", true},
		{"*", true},
		{"*.logins", true},
		{">", true},
	} {
		why, got := Reserved(c.s)
		if got != c.reserved {
			t.Errorf("Reserved(%q) = %v (%s), want %v", c.s, got, why, c.reserved)
		}
		if got && why == "" {
			t.Errorf("Reserved(%q) gives no reason", c.s)
		}
	}
}
