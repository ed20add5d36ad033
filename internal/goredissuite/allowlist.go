package main

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
)

// An allow-list entry excuses one spec in the configurations its pattern
// matches. The file has one entry a line:
//
//	configurations | spec | reason
//
// configurations is a comma-separated list of globs over configuration
// names (rs1-resp2, rs1-resp3, rs4-resp2, rs4-resp3): "rs*" is every
// redshard configuration, "rs1-*" one shard on both protocols. spec is the
// spec's key as the runner prints it (file: container / ... / leaf text).
// reason is a one-line category ("not-sharded: ...", "other: ..."). Lines
// starting with # and blank lines are ignored.
type allowEntry struct {
	Line     int
	Patterns []string
	Spec     string
	Reason   string
	used     bool
}

func readAllowList(file string) ([]*allowEntry, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var entries []*allowEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.SplitN(line, " | ", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("%s:%d: want \"configurations | spec | reason\", got %q", file, n, line)
		}
		e := &allowEntry{Line: n, Spec: strings.TrimSpace(parts[1]), Reason: strings.TrimSpace(parts[2])}
		for _, p := range strings.Split(parts[0], ",") {
			p = strings.TrimSpace(p)
			if _, err := path.Match(p, ""); err != nil || p == "" {
				return nil, fmt.Errorf("%s:%d: bad configuration pattern %q", file, n, p)
			}
			e.Patterns = append(e.Patterns, p)
		}
		if e.Reason == "" {
			return nil, fmt.Errorf("%s:%d: an entry needs a reason", file, n)
		}
		entries = append(entries, e)
	}
	return entries, sc.Err()
}

func (e *allowEntry) matches(config, spec string) bool {
	if e.Spec != spec {
		return false
	}
	for _, p := range e.Patterns {
		if ok, _ := path.Match(p, config); ok {
			return true
		}
	}
	return false
}

// gateFailure is a spec that passes on the plain client and not through
// redshard, for a reason the gate does not accept by itself.
type gateFailure struct {
	Config string
	Spec   spec
}

// gate compares every redshard configuration with its plain baseline. It
// returns the failures nothing excuses, and marks the allow-list entries
// that excused something. A failure is excused by ErrCrossShard on more
// than one shard, in a churn configuration by a refusal redshard documents
// for a membership change in progress (classChange), or by an allow-list
// entry; a spec failed by a goroutine of another failing spec (classLeaked)
// is not held against itself.
func gate(configs []config, results map[string][]spec, allow []*allowEntry) (unexcused, excused, accepted []gateFailure) {
	for _, c := range configs {
		if c.Shards == 0 {
			continue
		}
		baseline := map[string]string{}
		for _, s := range results[c.Baseline] {
			baseline[s.Key] = s.Class
		}
		for _, s := range results[c.Name] {
			if s.Class == classPassed || s.Class == classLeaked || baseline[s.Key] != classPassed {
				continue
			}
			if s.Class == classCrossShard && c.Shards > 1 || s.Class == classChange && c.Churn {
				accepted = append(accepted, gateFailure{c.Name, s})
				continue
			}
			ok := false
			for _, e := range allow {
				if e.matches(c.Name, s.Key) {
					e.used, ok = true, true
				}
			}
			if ok {
				excused = append(excused, gateFailure{c.Name, s})
			} else {
				unexcused = append(unexcused, gateFailure{c.Name, s})
			}
		}
	}
	return unexcused, excused, accepted
}

// allowListFor writes allow-list entries that excuse exactly fails (one
// line per spec, its configurations folded into globs), for
// -update-allowlist.
func allowListFor(fails []gateFailure, t refusalTexts) string {
	type agg struct {
		configs map[string]bool
		reason  string
	}
	bySpec := map[string]*agg{}
	var order []string
	for _, f := range fails {
		a := bySpec[f.Spec.Key]
		if a == nil {
			a = &agg{configs: map[string]bool{}}
			bySpec[f.Spec.Key] = a
			order = append(order, f.Spec.Key)
		}
		a.configs[f.Config] = true
		// The reason of the smallest configuration is the most telling:
		// one shard has no cross-shard excuse.
		if a.reason == "" || strings.HasPrefix(f.Config, "rs1-") {
			a.reason = t.reason(f.Spec.Class, f.Spec.Message)
		}
	}
	sort.Strings(order)
	var b strings.Builder
	for _, k := range order {
		a := bySpec[k]
		fmt.Fprintf(&b, "%s | %s | %s\n", foldConfigs(a.configs), k, a.reason)
	}
	return b.String()
}

// foldConfigs spells a set of redshard configurations as globs: all six
// is "rs*", both protocols of one kind "rs1-*", "rs4-*", "rs4churn-*".
func foldConfigs(set map[string]bool) string {
	kinds := []string{"rs1", "rs4", "rs4churn"}
	all := 0
	for _, n := range kinds {
		if set[n+"-resp2"] && set[n+"-resp3"] {
			all++
		}
	}
	if all == len(kinds) && len(set) == 2*len(kinds) {
		return "rs*"
	}
	var out []string
	for _, n := range kinds {
		switch {
		case set[n+"-resp2"] && set[n+"-resp3"]:
			out = append(out, n+"-*")
		case set[n+"-resp2"]:
			out = append(out, n+"-resp2")
		case set[n+"-resp3"]:
			out = append(out, n+"-resp3")
		}
	}
	var rest []string
	for c := range set {
		if !slices.Contains(kinds, strings.TrimSuffix(strings.TrimSuffix(c, "-resp2"), "-resp3")) {
			rest = append(rest, c)
		}
	}
	sort.Strings(rest)
	return strings.Join(append(out, rest...), ",")
}
