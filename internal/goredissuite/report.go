package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Outcome classes of one spec in one configuration.
const (
	classPassed     = "passed"
	classNotSharded = "not-sharded" // refused with redshard.ErrNotSharded
	classCrossShard = "cross-shard" // refused with redshard.ErrCrossShard
	classChange     = "change"      // refused for a membership change in progress: ErrHandoffInProgress, ErrStaleCursor
	classOther      = "other"       // any other failure (ErrUnknownCommand included)
	classSkipped    = "skipped"     // skipped (by the spec itself, e.g. for the server version)
	classLeaked     = "leaked"      // failed by a goroutine another, failing, spec left running
)

// spec is one spec's outcome in one configuration.
type spec struct {
	Key     string // file: container texts / leaf text, unique within a run
	File    string
	Group   string // top-level Describe and, when there is one, the Describe below it
	State   string // ginkgo's: passed, failed, skipped, panicked, timedout, ...
	Class   string
	Message string // the failure's message; "" when it passed
	Line    int    // the It's line in File
	// Churned: the membership changed while the spec ran (its churn log,
	// in GinkgoWriter, names a change, or the Rebalance of one).
	Churned bool
}

// ginkgoReport is the part of ginkgo's --json-report the runner reads.
type ginkgoReport []struct {
	SpecReports []struct {
		ContainerHierarchyTexts    []string
		LeafNodeType               string
		LeafNodeText               string
		LeafNodeLocation           location
		State                      string
		CapturedGinkgoWriterOutput string
		Failure                    struct {
			Message        string
			ForwardedPanic string
			Location       location
		}
	}
}

type location struct {
	FileName   string
	LineNumber int
}

// itSpan is the lines of one It(...) call of a spec file.
type itSpan struct {
	File       string // base name
	Start, End int    // lines of the call; Start is the spec's location
}

// itSpans parses the spec files in dir (as compiled, so the lines are the
// report's) for the lines of their It calls.
func itSpans(dir string, files []string) ([]itSpan, error) {
	var spans []itSpan
	for _, name := range files {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			return nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); ok && (id.Name == "It" || id.Name == "FIt" || id.Name == "PIt") {
				spans = append(spans, itSpan{name, fset.Position(call.Pos()).Line, fset.Position(call.End()).Line})
			}
			return true
		})
	}
	return spans, nil
}

// leakedFrom returns the start line of the It, other than the spec's own,
// whose body holds the failure's location: the failure came from a
// goroutine that spec left behind (the suite has specs whose goroutine
// asserts after the spec returned early on an error). 0 when there is none.
func leakedFrom(spans []itSpan, spec, failure location) int {
	file, line := filepath.Base(failure.FileName), failure.LineNumber
	for _, sp := range spans {
		if sp.File == file && sp.Start <= line && line <= sp.End {
			if sp.File == filepath.Base(spec.FileName) && sp.Start == spec.LineNumber {
				return 0
			}
			return sp.Start
		}
	}
	return 0
}

// refusalTexts are the messages of redshard's routing refusals, and of the
// refusals it documents for a membership change in progress, read from the
// checkout's errors.go so the classification follows the library.
type refusalTexts struct {
	NotSharded, CrossShard, Unknown string
	// Handoff (ErrHandoffInProgress: FLUSHDB/FLUSHALL/SWAPDB in a pipeline
	// or transaction during a change, a move that waited too long) and
	// StaleCursor (ErrStaleCursor: a SCAN cursor of the ring before a
	// change) are what a command may get because the membership changed.
	Handoff, StaleCursor string
}

// readRefusalTexts parses errors.go for the errors.New texts of
// ErrNotSharded, ErrCrossShard, ErrUnknownCommand, ErrHandoffInProgress
// and ErrStaleCursor.
func readRefusalTexts(repo string) (refusalTexts, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(repo, "errors.go"), nil, 0)
	if err != nil {
		return refusalTexts{}, err
	}
	texts := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 {
			return true
		}
		call, ok := vs.Values[0].(*ast.CallExpr)
		if !ok || !isSelector(call.Fun, "errors", "New") || len(call.Args) != 1 {
			return true
		}
		if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				texts[vs.Names[0].Name] = s
			}
		}
		return true
	})
	t := refusalTexts{NotSharded: texts["ErrNotSharded"], CrossShard: texts["ErrCrossShard"], Unknown: texts["ErrUnknownCommand"],
		Handoff: texts["ErrHandoffInProgress"], StaleCursor: texts["ErrStaleCursor"]}
	if t.NotSharded == "" || t.CrossShard == "" || t.Unknown == "" || t.Handoff == "" || t.StaleCursor == "" {
		return t, fmt.Errorf("errors.go: cannot find the texts of ErrNotSharded, ErrCrossShard, ErrUnknownCommand, ErrHandoffInProgress and ErrStaleCursor (found %v)", texts)
	}
	return t, nil
}

// classify tells a failure's class from its message.
func (t refusalTexts) classify(msg string) string {
	switch {
	case strings.Contains(msg, t.CrossShard):
		return classCrossShard
	case strings.Contains(msg, t.NotSharded):
		return classNotSharded
	case strings.Contains(msg, t.Handoff), strings.Contains(msg, t.StaleCursor):
		return classChange
	}
	return classOther
}

// reason is a one-line summary of a failure for the allow-list and the
// list of non-passing specs: the class and what the error says after
// redshard's sentinel text (or the message's first line).
func (t refusalTexts) reason(class, msg string) string {
	line := ""
	for _, sentinel := range []string{t.CrossShard, t.NotSharded, t.Handoff, t.StaleCursor, t.Unknown} {
		if i := strings.Index(msg, sentinel); i >= 0 {
			line = strings.TrimPrefix(msg[i:], sentinel)
			line = strings.TrimLeft(line, ": ")
			if line == "" || line[0] == '"' || line[0] == '\n' {
				line = sentinel
			}
			break
		}
	}
	if line == "" {
		var lines []string
		for _, l := range strings.Split(msg, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		switch {
		case len(lines) > 0 && lines[0] == "Expected":
			// Gomega: Expected / <type>: actual / to equal / <type>: wanted.
			line = strings.Join(lines[:min(4, len(lines))], " ")
		default:
			for _, l := range lines {
				if !strings.HasPrefix(l, "<") && l != "Unexpected error:" {
					line = l
					break
				}
			}
		}
	}
	if i := strings.IndexAny(line, "\n;"); i >= 0 {
		line = line[:i]
	}
	line = strings.Join(strings.Fields(line), " ")
	if len(line) > 110 {
		line = line[:107] + "..."
	}
	if line == "" {
		return class
	}
	return class + ": " + line
}

// readReport loads a run's ginkgo JSON report.
func readReport(path string, t refusalTexts, spans []itSpan) ([]spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep ginkgoReport
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var specs []spec
	seen := map[string]int{}
	for _, r := range rep {
		for _, sr := range r.SpecReports {
			if sr.LeafNodeType != "It" {
				continue
			}
			file := filepath.Base(sr.LeafNodeLocation.FileName)
			key := file + ": " + strings.Join(append(append([]string{}, sr.ContainerHierarchyTexts...), sr.LeafNodeText), " / ")
			if n := seen[key]; n > 0 {
				key = fmt.Sprintf("%s (#%d)", key, n+1)
			}
			seen[key]++
			group := sr.ContainerHierarchyTexts
			if len(group) > 2 {
				group = group[:2]
			}
			s := spec{Key: key, File: file, Group: strings.Join(group, " / "), State: sr.State, Line: sr.LeafNodeLocation.LineNumber,
				Churned: churnedIn(sr.CapturedGinkgoWriterOutput)}
			switch sr.State {
			case "passed":
				s.Class = classPassed
			case "skipped", "pending":
				s.Class = classSkipped
			default:
				s.Message = sr.Failure.Message
				if sr.Failure.ForwardedPanic != "" {
					s.Message += "\npanic: " + sr.Failure.ForwardedPanic
				}
				s.Class = t.classify(s.Message)
				if from := leakedFrom(spans, sr.LeafNodeLocation, sr.Failure.Location); from > 0 {
					s.Class = classLeaked
					s.Message = fmt.Sprintf("failed at %s:%d, in the It at line %d, whose goroutine outlived it:\n%s",
						filepath.Base(sr.Failure.Location.FileName), sr.Failure.Location.LineNumber, from, s.Message)
				}
			}
			specs = append(specs, s)
		}
	}
	return specs, nil
}

// beforeSuitePassed reports whether the report's BeforeSuite (the shim's,
// which points the suite at the runner's servers) passed.
func beforeSuitePassed(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var rep ginkgoReport
	if json.Unmarshal(data, &rep) != nil {
		return false
	}
	for _, r := range rep {
		for _, sr := range r.SpecReports {
			if sr.LeafNodeType == "BeforeSuite" {
				return sr.State == "passed"
			}
		}
	}
	return false
}

// counts is one row of the table.
type counts struct {
	Passed, NotSharded, CrossShard, Change, Other, Leaked, Skipped int
}

func (c *counts) add(s spec) {
	switch s.Class {
	case classPassed:
		c.Passed++
	case classNotSharded:
		c.NotSharded++
	case classCrossShard:
		c.CrossShard++
	case classChange:
		c.Change++
	case classOther:
		c.Other++
	case classSkipped:
		c.Skipped++
	case classLeaked:
		c.Leaked++
	}
}

// printTables writes the summary table (one row per configuration) and the
// per-group table (passed/refused/other per configuration) to w.
func printTables(w *strings.Builder, configs []config, results map[string][]spec) {
	fmt.Fprintf(w, "| configuration | passed | refused NotSharded / CrossShard / change** | other failed | leaked* | skipped |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|\n")
	for _, c := range configs {
		var n counts
		for _, s := range results[c.Name] {
			n.add(s)
		}
		fmt.Fprintf(w, "| %s | %d | %d / %d / %d | %d | %d | %d |\n", c.Name, n.Passed, n.NotSharded, n.CrossShard, n.Change, n.Other, n.Leaked, n.Skipped)
	}
	fmt.Fprintf(w, "\n*leaked: failed by a goroutine of an earlier spec that itself failed (not gated; that spec is).\n")
	fmt.Fprintf(w, "**change: refused with ErrHandoffInProgress or ErrStaleCursor, what redshard documents for a membership change in progress (rs4churn-*).\n")
	groups := map[string]map[string]*counts{}
	for _, c := range configs {
		for _, s := range results[c.Name] {
			g := groups[s.Group]
			if g == nil {
				g = map[string]*counts{}
				groups[s.Group] = g
			}
			if g[c.Name] == nil {
				g[c.Name] = &counts{}
			}
			g[c.Name].add(s)
		}
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "\nper group: passed / refused (NotSharded+CrossShard+change) / other failed\n\n| group |")
	for _, c := range configs {
		fmt.Fprintf(w, " %s |", c.Name)
	}
	fmt.Fprintf(w, "\n|---|")
	for range configs {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintln(w)
	for _, g := range names {
		fmt.Fprintf(w, "| %s |", g)
		for _, c := range configs {
			n := groups[g][c.Name]
			if n == nil {
				n = &counts{}
			}
			fmt.Fprintf(w, " %d/%d/%d |", n.Passed, n.NotSharded+n.CrossShard+n.Change, n.Other)
		}
		fmt.Fprintln(w)
	}
}

// writeNonPassing writes every spec that did not pass, per configuration
// (skips by the plain client left out: the server lacks what they need),
// with its class and the reason; flaky holds the specs (config + " | " +
// key) that failed in the run and passed when run again alone.
func writeNonPassing(path string, configs []config, results map[string][]spec, flaky map[string]bool, t refusalTexts) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Specs of go-redis %s that did not pass, per configuration.\n", goRedisVersion)
	fmt.Fprintf(&b, "# configuration | class | spec | reason (full failure messages: the ginkgo JSON reports next to this file)\n")
	for _, c := range configs {
		baseline := map[string]string{}
		for _, s := range results[c.Baseline] {
			baseline[s.Key] = s.Class
		}
		for _, s := range results[c.Name] {
			if s.Class == classPassed || (s.Class == classSkipped && baseline[s.Key] != classPassed) {
				continue
			}
			class := s.Class
			if flaky[c.Name+" | "+s.Key] {
				class += " (flaky: passed when run again alone)"
			}
			fmt.Fprintf(&b, "%s | %s | %s | %s\n", c.Name, class, s.Key, t.reason(s.Class, s.Message))
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// printGateTable writes, per redshard configuration, how the gate judged
// its specs: passed; failing on the plain client too (not gated); refused
// and accepted without an entry (ErrCrossShard on 4 shards; a change
// refusal under churn); excused by the allow-list; flaky (failed in the
// run, passed alone); failed, not excused.
func printGateTable(w *strings.Builder, configs []config, results map[string][]spec, accepted, excused, unexcused []gateFailure, flaky map[string]bool) {
	per := func(fs []gateFailure, name string, class string) int {
		n := 0
		for _, f := range fs {
			if f.Config == name && (class == "" || f.Spec.Class == class) {
				n++
			}
		}
		return n
	}
	fmt.Fprintf(w, "gate, per configuration (specs that pass on the plain client of the same protocol)\n\n")
	fmt.Fprintf(w, "| configuration | passed | refused, accepted: CrossShard / change | allow-listed | flaky | failed (gate) | specs run across a change*** |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|\n")
	for _, c := range configs {
		if c.Shards == 0 {
			continue
		}
		passed := 0
		for _, s := range results[c.Name] {
			if s.Class == classPassed {
				passed++
			}
		}
		nflaky := 0
		for k := range flaky {
			if strings.HasPrefix(k, c.Name+" | ") {
				nflaky++
			}
		}
		churned := "-"
		if c.Churn {
			n := 0
			for _, s := range results[c.Name] {
				if s.Churned {
					n++
				}
			}
			churned = fmt.Sprint(n)
		}
		fmt.Fprintf(w, "| %s | %d | %d / %d | %d | %d | %d | %s |\n", c.Name, passed,
			per(accepted, c.Name, classCrossShard), per(accepted, c.Name, classChange),
			per(excused, c.Name, ""), nflaky, per(unexcused, c.Name, ""), churned)
	}
	fmt.Fprintf(w, "\n***specs during which a change was made or finished (rs4churn-*: the spec's GinkgoWriter log of the churn).\n")
}

// churnedIn reports whether a spec's GinkgoWriter output (the churn shim's
// log lines, "churn <time>: change #N: ...") shows a membership change made
// or finished while it ran.
func churnedIn(out string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "churn ") && strings.Contains(l, ": change #") {
			return true
		}
	}
	return false
}
