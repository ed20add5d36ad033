package registry_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/redshard/redshard/registry"
)

var (
	doc0 = json.RawMessage(`{"shards":[{"name":"a","addr":"10.0.0.1:6379"}]}`)
	doc1 = json.RawMessage(`{"shards":[{"name":"a","addr":"10.0.0.1:6379"},{"name":"b","addr":"10.0.0.2:6379"}]}`)
)

// history returns the configs of an initial config and one whole change.
func history(t *testing.T) (stable0, prepare, migrate, commit, stable1 registry.Config) {
	t.Helper()
	stable0 = registry.Initial(doc0)
	prepare = stable0.Begin(doc1, "c1", "driver")
	var err error
	if migrate, err = prepare.Advance(); err != nil {
		t.Fatal(err)
	}
	if commit, err = migrate.Advance(); err != nil {
		t.Fatal(err)
	}
	if stable1, err = commit.Advance(); err != nil {
		t.Fatal(err)
	}
	return
}

func TestHistory(t *testing.T) {
	s0, p, m, c, s1 := history(t)
	want := []registry.Version{
		{Epoch: 1, Phase: registry.Stable}, {Epoch: 2, Phase: registry.Prepare}, {Epoch: 2, Phase: registry.Migrate},
		{Epoch: 2, Phase: registry.Commit}, {Epoch: 2, Phase: registry.Stable},
	}
	for i, cfg := range []registry.Config{s0, p, m, c, s1} {
		if cfg.Version() != want[i] {
			t.Fatalf("config %d is %s, want %s", i, cfg.Version(), want[i])
		}
		if i > 0 && !want[i-1].Less(want[i]) {
			t.Fatalf("%s is not before %s", want[i-1], want[i])
		}
	}
	if !p.InFlight() || !m.InFlight() || !c.InFlight() || s0.InFlight() || s1.InFlight() {
		t.Fatal("InFlight wrong")
	}
	if string(m.PrevDoc) != string(doc0) || m.PrevEpoch != 1 || m.Change != "c1" || m.Driver != "driver" {
		t.Fatalf("migrate lost the change: %+v", m)
	}
	if s1.PrevDoc != nil || s1.Change != "" || string(s1.Doc) != string(doc1) {
		t.Fatalf("stable after commit keeps change fields: %+v", s1)
	}
	if _, err := s1.Advance(); !errors.Is(err, registry.ErrInvalidTransition) {
		t.Fatalf("Advance of a stable config: %v, want ErrInvalidTransition", err)
	}
	if _, err := m.Abort(); !errors.Is(err, registry.ErrInvalidTransition) {
		t.Fatalf("Abort in migrate: %v, want ErrInvalidTransition", err)
	}
	a, err := p.Abort()
	if err != nil || a.Version() != (registry.Version{Epoch: 3, Phase: registry.Stable}) || string(a.Doc) != string(doc0) {
		t.Fatalf("Abort in prepare = %s %s, %v; want epoch 3 stable with the previous document", a.Version(), a.Doc, err)
	}
	if !(registry.Version{}).Less(s0.Version()) || (registry.Version{}).String() != "none" || p.Version().String() != "epoch 2 prepare" {
		t.Fatal("the zero Version or String is wrong")
	}
}

func TestCheckTransition(t *testing.T) {
	s0, p, m, c, s1 := history(t)
	aborted, err := p.Abort()
	if err != nil {
		t.Fatal(err)
	}
	edit := func(cfg registry.Config, f func(*registry.Config)) registry.Config {
		f(&cfg)
		return cfg
	}
	tests := []struct {
		name       string
		prev, next registry.Config
		ok         bool
	}{
		{"initial", registry.Config{}, s0, true},
		{"initial at a higher epoch (re-seed)", registry.Config{}, edit(s0, func(c *registry.Config) { c.Epoch = 40 }), true},
		{"begin", s0, p, true},
		{"migrate", p, m, true},
		{"commit", m, c, true},
		{"end", c, s1, true},
		{"abort", p, aborted, true},

		{"first config in flight", registry.Config{}, p, false},
		{"first config at epoch 0", registry.Config{}, edit(s0, func(c *registry.Config) { c.Epoch = 0 }), false},
		{"same again", s0, s0, false},
		{"stable to stable", s0, edit(s0, func(c *registry.Config) { c.Epoch = 2 }), false},
		{"skip prepare", s0, m, false},
		{"skip migrate", p, c, false},
		{"backwards", m, p, false},
		{"begin skipping an epoch", s0, edit(p, func(c *registry.Config) { c.Epoch = 3 }), false},
		{"begin from another document", s0, edit(p, func(c *registry.Config) { c.PrevDoc = doc1 }), false},
		{"begin without a change id", s0, edit(p, func(c *registry.Config) { c.Change = "" }), false},
		{"migrate to another document", p, edit(m, func(c *registry.Config) { c.Doc = doc0 }), false},
		{"migrate another change", p, edit(m, func(c *registry.Config) { c.Change = "c2" }), false},
		{"end with another document", c, edit(s1, func(c *registry.Config) { c.Doc = doc0 }), false},
		{"stable keeping the change", c, edit(s1, func(c *registry.Config) { c.Change = "c1" }), false},
		{"abort to the new document", p, edit(aborted, func(c *registry.Config) { c.Doc = doc1 }), false},
		{"abort from migrate", m, edit(aborted, func(c *registry.Config) {}), false},
		{"doc not JSON", registry.Config{}, edit(s0, func(c *registry.Config) { c.Doc = json.RawMessage(`{"shards":`) }), false},
		{"doc not an object", registry.Config{}, edit(s0, func(c *registry.Config) { c.Doc = json.RawMessage(`"x"`) }), false},
		{"no doc", registry.Config{}, edit(s0, func(c *registry.Config) { c.Doc = nil }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := registry.CheckTransition(tt.prev, tt.next)
			if tt.ok && err != nil {
				t.Fatalf("CheckTransition(%s → %s): %v", tt.prev.Version(), tt.next.Version(), err)
			}
			if !tt.ok && !errors.Is(err, registry.ErrInvalidTransition) {
				t.Fatalf("CheckTransition(%s → %s) = %v, want ErrInvalidTransition", tt.prev.Version(), tt.next.Version(), err)
			}
		})
	}
}

// FuzzCheckTransition checks that every legal transition goes forward:
// a watcher's "never older" rule can then never drop a legal config.
func FuzzCheckTransition(f *testing.F) {
	f.Add(uint64(1), "stable", uint64(2), "prepare", uint64(1), true, true)
	f.Add(uint64(2), "commit", uint64(2), "stable", uint64(0), false, false)
	f.Add(uint64(2), "prepare", uint64(3), "stable", uint64(0), false, false)
	f.Fuzz(func(t *testing.T, pe uint64, pp string, ne uint64, np string, prevEpoch uint64, sameDoc, change bool) {
		prev := registry.Config{Epoch: pe, Phase: registry.Phase(pp), Doc: doc0, PrevDoc: doc1, PrevEpoch: pe - 1, Change: "c"}
		if pe == 0 {
			prev = registry.Config{}
		}
		next := registry.Config{Epoch: ne, Phase: registry.Phase(np), Doc: doc1, PrevEpoch: prevEpoch}
		if sameDoc {
			next.Doc = doc0
		}
		if next.InFlight() {
			next.PrevDoc = doc0
			if change {
				next.Change = "c"
			}
		}
		if registry.CheckTransition(prev, next) == nil && !prev.Version().Less(next.Version()) {
			t.Fatalf("legal transition %s → %s does not go forward", prev.Version(), next.Version())
		}
	})
}

func TestAcked(t *testing.T) {
	ms := []registry.Member{
		{ID: "a", Epoch: 2, Phase: registry.Migrate},
		{ID: "b", Epoch: 2, Phase: registry.Prepare},
		{ID: "c", Epoch: 1, Phase: registry.Stable},
		{ID: "d", Epoch: 2, Phase: registry.Commit},
	}
	ids := func(ms []registry.Member) (s string) {
		for _, m := range ms {
			s += m.ID
		}
		return s
	}
	for _, tt := range []struct {
		v    registry.Version
		late string
	}{
		{registry.Version{Epoch: 1, Phase: registry.Stable}, ""},
		{registry.Version{Epoch: 2, Phase: registry.Prepare}, "c"},
		{registry.Version{Epoch: 2, Phase: registry.Migrate}, "bc"},
		{registry.Version{Epoch: 2, Phase: registry.Stable}, "abcd"},
	} {
		if got := ids(registry.Acked(ms, tt.v)); got != tt.late {
			t.Errorf("Acked(%s) = %q late, want %q", tt.v, got, tt.late)
		}
	}
	if registry.Acked(nil, registry.Version{Epoch: 9, Phase: registry.Stable}) != nil {
		t.Error("Acked of no members is not nil")
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []*registry.Options{nil, {}, {PollInterval: time.Millisecond, MemberTTL: time.Hour}} {
		if err := o.Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", o, err)
		}
	}
	for _, o := range []*registry.Options{{PollInterval: -1}, {PollInterval: time.Microsecond}, {MemberTTL: -time.Second}, {MemberTTL: 1}} {
		if err := o.Validate(); !errors.Is(err, registry.ErrInvalidOptions) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
	d, err := (*registry.Options)(nil).WithDefaults()
	if err != nil || d.PollInterval != registry.DefaultPollInterval || d.MemberTTL != registry.DefaultMemberTTL {
		t.Fatalf("defaults = %+v, %v", d, err)
	}
}

func TestDecode(t *testing.T) {
	for _, bad := range []string{``, `{`, `{"epoch":0,"phase":"stable","doc":{}}`, `{"epoch":1,"phase":"later","doc":{}}`} {
		if _, err := registry.DecodeConfig([]byte(bad)); err == nil {
			t.Errorf("DecodeConfig(%q) succeeded", bad)
		}
	}
	s0, p, _, _, _ := history(t)
	for _, c := range []registry.Config{s0, p} {
		data, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := registry.DecodeConfig(data)
		if err != nil || got.Version() != c.Version() || string(got.Doc) != string(c.Doc) || string(got.PrevDoc) != string(c.PrevDoc) || !got.Since.Equal(c.Since) {
			t.Fatalf("round trip of %s: %+v, %v", c.Version(), got, err)
		}
	}
	if _, err := registry.EncodeMember(registry.Member{}); !errors.Is(err, registry.ErrInvalidArgument) {
		t.Fatalf("EncodeMember without an ID: %v", err)
	}
}

func TestSameDoc(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{`{"shards":[{"name":"a","addr":"h:1"}],"vnodes_per_weight":8}`, `{ "vnodes_per_weight": 8, "shards": [ {"addr": "h:1", "name": "a"} ] }`, true},
		{`{"shards":[{"name":"a"},{"name":"b"}]}`, `{"shards":[{"name":"b"},{"name":"a"}]}`, false}, // arrays keep their order
		{`{"a":1}`, `{"a":2}`, false},
		{``, ``, true},
		{``, `{}`, false},
		{`{"a":`, `{"a":`, false},
	} {
		if got := registry.SameDoc(json.RawMessage(tc.a), json.RawMessage(tc.b)); got != tc.want {
			t.Errorf("SameDoc(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestRestore: a restored config may follow what a registry that lost its
// data holds (nothing, or an older config), in any phase, but never a
// config that is not older; its next phase is an ordinary one.
func TestRestore(t *testing.T) {
	doc := json.RawMessage(`{"shards":[{"name":"a","addr":"127.0.0.1:1"}]}`)
	two := json.RawMessage(`{"shards":[{"name":"a","addr":"127.0.0.1:1"},{"name":"b","addr":"127.0.0.1:2"}]}`)
	stable := registry.Initial(doc)
	migrate, err := stable.Begin(two, "c1", "d").Advance()
	if err != nil {
		t.Fatal(err)
	}
	lost := registry.Restore(migrate, "from the beacons")
	for _, prev := range []registry.Config{{}, stable} {
		if err := registry.CheckTransition(prev, lost); err != nil {
			t.Errorf("restoring %s over %s: %v", lost.Version(), prev.Version(), err)
		}
	}
	if err := registry.CheckTransition(migrate, lost); !errors.Is(err, registry.ErrInvalidTransition) {
		t.Errorf("restoring %s over itself: %v, want ErrInvalidTransition", lost.Version(), err)
	}
	next, err := lost.Advance()
	if err != nil || next.Restored != "" || registry.CheckTransition(lost, next) != nil {
		t.Errorf("the phase after a restored one: %+v, %v", next, err)
	}
	if lost.ID() != migrate.ID() || stable.ID() == registry.Initial(two).ID() {
		t.Errorf("IDs: restored %q of %q; stable %q", lost.ID(), migrate.ID(), stable.ID())
	}
}
