package command

import (
	"strings"
	"testing"
)

// TestNameIndex checks that the name index agrees with the table it
// mirrors: every name is found (as is and in upper case), nothing else is,
// and no name needs a long probe sequence.
func TestNameIndex(t *testing.T) {
	worst, sum := 0, 0
	for name, e := range table {
		if got := names.get(name); got != e {
			t.Errorf("names.get(%q) = %v, want the table's row", name, got)
		}
		if got := findName(strings.ToUpper(name)); got != e {
			t.Errorf("findName(%q) is not the table's row", strings.ToUpper(name))
		}
		if got := findName([]byte(name)); got != e {
			t.Errorf("findName([]byte(%q)) is not the table's row", name)
		}
		p := names.probes(name)
		worst, sum = max(worst, p), sum+p
	}
	if mean := float64(sum) / float64(len(table)); worst > 12 || mean > 1.6 {
		t.Errorf("probe sequences: longest %d slots, mean %.2f; want <= 12 and <= 1.6: change nameHash", worst, mean)
	}
	for _, s := range []string{"", "x", "gett", "ge", "GETX", "get ", "object|encoding", strings.Repeat("a", 100), strings.Repeat("A", 100)} {
		if e := findName(s); e != nil {
			t.Errorf("findName(%q) = %q, want nil", s, e.info.Name)
		}
	}
}
