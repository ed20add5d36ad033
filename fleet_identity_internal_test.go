package redshard

import (
	"strings"
	"testing"
)

// TestConnNameEncoding (issue 26, finding 3): every member id gives a
// connection name that Redis accepts (only '!' to '~'), parseConnName
// returns the id and incarnation it was made from, and distinct pairs give
// distinct names, including ids that a name filter once confused.
func TestConnNameEncoding(t *testing.T) {
	inc := newIncarnation()
	if !validIncarnation(inc) {
		t.Fatalf("newIncarnation() = %q: not a valid incarnation", inc)
	}
	if other := newIncarnation(); other == inc {
		t.Fatalf("two incarnations drew the same token %q", inc)
	}
	ids := []string{"", "w 1", "w_1", "w%201", "w%1", "%", "%%", "café-1", "caf%C3%A9-1", "caf\xe9-1",
		"a:b", "rsf:x", "\x00", "\x7f", "\xff", "tab\there", "new\nline", "~!", "host/123/abcd"}
	names := map[string]connMember{}
	for _, id := range ids {
		for _, in := range []string{inc, strings.Repeat("0", incarnationLen)} {
			name := connName(id, in)
			for i := 0; i < len(name); i++ {
				if name[i] < '!' || name[i] > '~' {
					t.Fatalf("connName(%q) = %q: byte %#x Redis refuses", id, name, name[i])
				}
			}
			m, ok := parseConnName(name)
			if !ok || m != (connMember{id, in}) {
				t.Fatalf("parseConnName(connName(%q, %q)) = %+v, %v", id, in, m, ok)
			}
			if prev, dup := names[name]; dup {
				t.Fatalf("connName(%q, %q) = connName(%q, %q) = %q", id, in, prev.id, prev.incarnation, name)
			}
			names[name] = connMember{id, in}
		}
	}
	for _, bad := range []string{"rsf:w_1", "rsf:" + inc, "rsf:" + inc[1:] + ":x", "rsf:" + strings.ToUpper(inc) + ":x",
		"rsf:" + inc + ":%4", "rsf:" + inc + ":%41", "rsf:" + inc + ":%e9", "rsf:" + inc + ":a b", "other:" + inc + ":x"} {
		if m, ok := parseConnName(bad); ok {
			t.Errorf("parseConnName(%q) = %+v: connName makes no such name", bad, m)
		}
	}
}
