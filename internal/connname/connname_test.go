package connname

import (
	"strings"
	"testing"
)

// TestConnNameEncoding (issue 26, finding 3): every member id gives a
// connection name that Redis accepts (only '!' to '~'), Parse
// returns the id and incarnation it was made from, and distinct pairs give
// distinct names, including ids that a name filter once confused.
func TestConnNameEncoding(t *testing.T) {
	inc := NewIncarnation()
	if !ValidIncarnation(inc) {
		t.Fatalf("NewIncarnation() = %q: not a valid incarnation", inc)
	}
	if other := NewIncarnation(); other == inc {
		t.Fatalf("two incarnations drew the same token %q", inc)
	}
	ids := []string{"", "w 1", "w_1", "w%201", "w%1", "%", "%%", "café-1", "caf%C3%A9-1", "caf\xe9-1",
		"a:b", "rsf:x", "\x00", "\x7f", "\xff", "tab\there", "new\nline", "~!", "host/123/abcd"}
	names := map[string]Member{}
	for _, id := range ids {
		for _, in := range []string{inc, strings.Repeat("0", IncarnationLen)} {
			name := Name(id, in)
			for i := 0; i < len(name); i++ {
				if name[i] < '!' || name[i] > '~' {
					t.Fatalf("Name(%q) = %q: byte %#x Redis refuses", id, name, name[i])
				}
			}
			m, ok := Parse(name)
			if !ok || m != (Member{id, in}) {
				t.Fatalf("Parse(Name(%q, %q)) = %+v, %v", id, in, m, ok)
			}
			if prev, dup := names[name]; dup {
				t.Fatalf("Name(%q, %q) = Name(%q, %q) = %q", id, in, prev.ID, prev.Incarnation, name)
			}
			names[name] = Member{id, in}
		}
	}
	for _, bad := range []string{"rsf:w_1", "rsf:" + inc, "rsf:" + inc[1:] + ":x", "rsf:" + strings.ToUpper(inc) + ":x",
		"rsf:" + inc + ":%4", "rsf:" + inc + ":%41", "rsf:" + inc + ":%e9", "rsf:" + inc + ":a b", "other:" + inc + ":x"} {
		if m, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) = %+v: connName makes no such name", bad, m)
		}
	}
}
