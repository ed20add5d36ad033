package command

import (
	"strings"
	"testing"
)

// TestTableRows checks that every row is consistent with its class.
func TestTableRows(t *testing.T) {
	check := func(e *entry) {
		i := e.info
		if i.Name == "" || i.Name != strings.ToLower(i.Name) {
			t.Errorf("%q: name must be lower-case and non-empty", i.Name)
		}
		if (i.Class == Fanout) != (i.Merge != MergeNone) {
			t.Errorf("%s: class %v with merge %v", i.Name, i.Class, i.Merge)
		}
		if (i.Class == Split) != (i.Step > 0) {
			t.Errorf("%s: class %v with step %d", i.Name, i.Class, i.Step)
		}
		if (i.Class == NotSharded) != (i.Hint != "") {
			t.Errorf("%s: class %v with hint %q", i.Name, i.Class, i.Hint)
		}
		if i.Flags&Write != 0 && i.Flags&ReadOnly != 0 {
			t.Errorf("%s: both Write and ReadOnly", i.Name)
		}
		switch i.Class {
		case Keyed, Split, Channel:
			if e.keys.kind == noKeys {
				t.Errorf("%s: class %v without a key spec", i.Name, i.Class)
			}
		case Fanout, Scan:
			if e.keys.kind != noKeys {
				t.Errorf("%s: class %v with a key spec", i.Name, i.Class)
			}
		case Unknown:
			t.Errorf("%s: a row of class Unknown", i.Name)
		}
		if e.keys.kind == rangeKeys && (e.keys.first < 1 || e.keys.step < 1) {
			t.Errorf("%s: bad range %+v", i.Name, e.keys)
		}
	}
	n := 0
	for name, e := range table {
		if e.subs == nil {
			if name != e.info.Name {
				t.Errorf("row %q is indexed as %q", e.info.Name, name)
			}
			check(e)
			n++
			continue
		}
		if e.dflt != nil {
			check(e.dflt)
		}
		for sub, s := range e.subs {
			if s.info.Name != name+"|"+sub {
				t.Errorf("subcommand %q is indexed as %s|%s", s.info.Name, name, sub)
			}
			check(s)
			n++
		}
	}
	if n < 400 {
		t.Errorf("only %d rows", n)
	}
}

func TestBuildRejectsBadTables(t *testing.T) {
	for name, rows := range map[string][]*entry{
		"duplicate":     {keyed("get", 0, key(1)), keyed("get", 0, key(1))},
		"upper-case":    {keyed("GET", 0, key(1))},
		"orphan sub":    {keyed("nosuch|sub", 0, key(2))},
		"duplicate sub": {keyed("c|a", 0, key(2)), keyed("c|a", 0, key(2))},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("build accepted the table")
				}
			}()
			build([]*entry{container("c", nil)}, rows)
		})
	}
}
