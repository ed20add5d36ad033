package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redshard/redshard"
)

// fmtDur formats a latency with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d)
	case d < time.Millisecond:
		return fmt.Sprintf("%.3gµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.3gms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.3gs", d.Seconds())
}

// shardLoad is one shard's part of a run.
type shardLoad struct {
	name     string
	weight   float64
	ideal    float64 // weight share among the shards that took part
	commands int64
}

// loads returns every shard's load, sorted by name, and busiest/mean.
func (r *result) loads() (loads []shardLoad, busiest string, ratio float64) {
	counts := map[string]int64{}
	for _, s := range r.shards {
		counts[s.name] = s.traced
	}
	var total float64
	for _, w := range r.weights {
		total += w
	}
	var sum int64
	for _, name := range slices.Sorted(maps.Keys(r.weights)) {
		loads = append(loads, shardLoad{name, r.weights[name], r.weights[name] / total, counts[name]})
		sum += counts[name]
	}
	if len(loads) == 0 || sum == 0 {
		return loads, "", 0
	}
	mean := float64(sum) / float64(len(loads))
	b := slices.MaxFunc(loads, func(a, b shardLoad) int { return cmp.Compare(a.commands, b.commands) })
	return loads, b.name, float64(b.commands) / mean
}

// weightedPeak is the largest ratio of a shard's share of the commands to
// its weight share, and the shard: 1.00 is load exactly in proportion to
// weight.
func (r *result) weightedPeak() string {
	loads, _, _ := r.loads()
	sum := r.commands()
	best, name := 0.0, ""
	for _, l := range loads {
		if sum == 0 || l.ideal == 0 {
			continue
		}
		if v := float64(l.commands) / float64(sum) / l.ideal; v > best {
			best, name = v, l.name
		}
	}
	if name == "" {
		return "-"
	}
	return fmt.Sprintf("%.2f (%s)", best, name)
}

func (r *result) commands() int64 {
	var n int64
	for _, s := range r.shards {
		n += s.traced
	}
	return n
}

func (r *result) throughput() float64 { return float64(r.t.ops) / r.elapsed.Seconds() }

// hitRate is hits / reads answered (hits and misses).
func (r *result) hitRate() string {
	if r.t.hits+r.t.misses == 0 {
		return "-"
	}
	return pct(float64(r.t.hits) / float64(r.t.hits+r.t.misses))
}

// metrics are the summary rows of a run, for one column of a table.
func (r *result) metrics() [][2]string {
	t := r.t
	_, busiest, ratio := r.loads()
	m := [][2]string{
		{"ops", fmt.Sprintf("%d in %.2fs", t.ops, r.elapsed.Seconds())},
		{"throughput", fmt.Sprintf("%.0f ops/s", r.throughput())},
		{"CPU per op", perOp(r.cpu, r.t.ops)},
		{"  of it user mode", perOp(r.cpuUser, r.t.ops)},
		{"server CPU per op", perOp(r.serverCPU, r.t.ops)}, // all real shards together; "-" embedded
		{"server commands per op", r.serverCommandsPerOp()},
		{"latency p50", fmtDur(t.hist.quantile(0.5))},
		{"latency p99", fmtDur(t.hist.quantile(0.99))},
		{"latency p999", fmtDur(t.hist.quantile(0.999))},
		{"latency max", fmtDur(time.Duration(t.hist.max))},
		{"latency mean", fmtDur(t.hist.mean())},
		{"reads", fmt.Sprint(t.reads)},
		{"writes", fmt.Sprint(t.writes)},
		{"hits", fmt.Sprint(t.hits)},
		{"misses", fmt.Sprint(t.misses)},
		{"hit rate", r.hitRate()},
		{"errors", fmt.Sprint(t.errors())},
		{"busiest/mean", fmt.Sprintf("%.2f (%s)", ratio, busiest)},
		{"max share/weight share", r.weightedPeak()},
		{"served locally", fmt.Sprint(t.local)},
		{"GETs served locally", r.localShare()},
	}
	if r.celebrity {
		m = append(m, [2]string{"celebrity sent", fmt.Sprintf("%d GETs, %d in MGETs", r.watched, r.watchedMGet)})
	}
	if h := r.hot; h != nil {
		m = append(m,
			[2]string{"local cache hits", fmt.Sprint(h.CacheHits)},
			[2]string{"local cache misses", fmt.Sprint(h.CacheMisses)},
			[2]string{"coalesced", fmt.Sprint(h.Coalesced)},
			[2]string{"split reads", fmt.Sprint(h.SplitReads)},
			[2]string{"hot keys at the end", fmt.Sprint(len(h.Keys))},
		)
		if c := h.Cache; h.Mitigation == redshard.LocalCache {
			// The cache's own counters (localcache.Stats), to tell where
			// the misses go: fills refused by the counters, entries
			// evicted (expired after MaxStaleness, or for room), Gets
			// that found an entry hidden by a bump.
			m = append(m,
				[2]string{"cache fills stored/refused", fmt.Sprintf("%d / %d (outdated %d, dropped %d)", c.Sets, c.Outdated+c.Dropped, c.Outdated, c.Dropped)},
				[2]string{"cache rejected/evicted", fmt.Sprintf("%d / %d", c.Rejected, c.Evicted)},
				[2]string{"cache gets hidden", fmt.Sprintf("%d by invalidation, %d expired", c.Invalidated, c.Expired)},
				[2]string{"cache bytes", fmt.Sprintf("%d of %d", c.Bytes, c.MaxBytes)},
			)
		}
		if h.Mitigation == redshard.LocalCache {
			m = append(m, [2]string{"invalidation", invalidationSummary(h.Shards)},
				[2]string{"keys invalidated by the servers", fmt.Sprint(h.Invalidations)})
		}
	}
	return m
}

// serverCommandsPerOp is the commands the real shards ran per operation
// (INFO commandstats, every client's, on the wire: a MULTI and its EXEC
// count), with the count, or "-" where it is unknown.
func (r *result) serverCommandsPerOp() string {
	if r.serverCmds < 0 || r.t.ops == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f (%d)", float64(r.serverCmds)/float64(r.t.ops), r.serverCmds)
}

// localShare is the fraction of the keys read that the client's cache
// answered, with the counts it comes from, or "-" without a cache.
func (r *result) localShare() string {
	if r.cacheHits < 0 {
		return "-"
	}
	keys := r.t.reads * int64(max(1, r.mget))
	if keys == 0 {
		return fmt.Sprintf("- (%d cache hits, no reads)", r.cacheHits)
	}
	return fmt.Sprintf("%.3f (%d/%d)", float64(r.cacheHits)/float64(keys), r.cacheHits, keys)
}

// invalidationSummary counts the shards in each InvalidationState:
// "tracking 3" or "staleness-only 2, unprobed 1".
func invalidationSummary(shards []redshard.HotShardStats) string {
	n := map[string]int{}
	for _, s := range shards {
		n[s.Invalidation.String()]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, n[k]))
	}
	return cmp.Or(strings.Join(parts, ", "), "-")
}

// check is the accounting line: every operation handed one command to a
// shard client, or none (served locally, or refused), or more (extra).
func (r *result) check() string {
	if r.noCheck != "" {
		return fmt.Sprintf("check %s: %s", r.system, r.noCheck)
	}
	t := r.t
	cmds := r.commands()
	verdict := "ok"
	if t.ops != cmds+t.local+t.refused-t.extra {
		verdict = "MISMATCH"
	}
	return fmt.Sprintf("check %s: ops %d = shard commands %d + served locally %d + refused %d - extra %d: %s",
		r.system, t.ops, cmds, t.local, t.refused, t.extra, verdict)
}

func (r *result) writeEvents(w io.Writer) {
	for _, e := range r.events {
		fmt.Fprintf(w, "  at %.2fs: %s\n", e.at.Seconds(), e.what)
	}
	for _, e := range r.runErrors {
		fmt.Fprintf(w, "  %s\n", e)
	}
}

func (r *result) writeErrors(w io.Writer) {
	if len(r.t.errs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nerrors by kind (%s):\n", r.system)
	t := &table{align: "l"}
	for _, k := range slices.Sorted(maps.Keys(r.t.errs)) {
		t.add("  "+k, fmt.Sprint(r.t.errs[k]))
	}
	t.write(w)
}

// write prints one run's report.
func (r *result) write(w io.Writer) {
	fmt.Fprintf(w, "client:   %s (%s)\n", r.system, r.setting)
	r.writeEvents(w)
	fmt.Fprintln(w)
	t := &table{align: "l"}
	for _, m := range r.metrics() {
		t.add(m[0], m[1])
	}
	t.write(w)
	r.writeErrors(w)

	loads, _, _ := r.loads()
	fmt.Fprintln(w, "\ncommands handed to each shard's client:")
	sum := r.commands()
	var mean float64
	if len(loads) > 0 {
		mean = float64(sum) / float64(len(loads))
	}
	st := &table{}
	st.add("shard", "weight", "ideal", "commands", "share", "vs mean")
	for _, l := range loads {
		share, vs := "-", "-"
		if sum > 0 {
			share = pct(float64(l.commands) / float64(sum))
			vs = fmt.Sprintf("%.2f", float64(l.commands)/mean)
		}
		st.add(l.name, fmt.Sprintf("%g", l.weight), pct(l.ideal), fmt.Sprint(l.commands), share, vs)
	}
	st.write(w)
	if r.untraced > 0 {
		fmt.Fprintf(w, "(not counted above: %d commands that serve no operation by themselves: connection setup and CLIENT commands\n(HELLO, CLIENT SETINFO/TRACKING/CACHING), heartbeats, background work)\n", r.untraced)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, r.check())
}

// writeComparison prints several runs side by side; for each system in
// refs, rows of every run's throughput and CPU per operation as ratios to
// that system's run follow the throughput and CPU rows.
func writeComparison(w io.Writer, results []*result, refs []string) {
	for _, r := range results {
		fmt.Fprintf(w, "client:   %s (%s)\n", r.system, r.setting)
		r.writeEvents(w)
	}
	fmt.Fprintln(w)
	t := &table{}
	head := []string{""}
	for _, r := range results {
		head = append(head, r.system)
	}
	t.add(head...)
	rows := map[string][]string{}
	var order []string
	for i, r := range results {
		for _, m := range r.metrics() {
			if _, ok := rows[m[0]]; !ok {
				order = append(order, m[0])
				rows[m[0]] = make([]string, len(results))
			}
			rows[m[0]][i] = m[1]
		}
	}
	for _, k := range order {
		cells := []string{k}
		for _, v := range rows[k] {
			cells = append(cells, cmp.Or(v, "-"))
		}
		t.add(cells...)
		if k == "CPU per op" {
			for _, ref := range refs {
				t.add(ratioRow("ops/s vs "+ref, results, ref, (*result).throughput)...)
				t.add(ratioRow("CPU per op vs "+ref, results, ref, (*result).cpuPerOpNs)...)
			}
		}
	}
	t.write(w)
	for _, r := range results {
		r.writeErrors(w)
	}

	fmt.Fprintln(w, "\ncommands handed to each shard's client (share of the run's commands):")
	st := &table{}
	head = []string{"shard", "weight"}
	for _, r := range results {
		head = append(head, r.system, "share")
	}
	st.add(head...)
	names := map[string]float64{}
	for _, r := range results {
		maps.Copy(names, r.weights)
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		cells := []string{name, fmt.Sprintf("%g", names[name])}
		for _, r := range results {
			var n int64
			for _, s := range r.shards {
				if s.name == name {
					n = s.traced
				}
			}
			share := "-"
			if sum := r.commands(); sum > 0 {
				share = pct(float64(n) / float64(sum))
			}
			cells = append(cells, fmt.Sprint(n), share)
		}
		st.add(cells...)
	}
	st.write(w)
	fmt.Fprintln(w)
	for _, r := range results {
		fmt.Fprintln(w, r.check())
	}
}

// perOp is a CPU time (the process's, or the real shards') per operation
// of the run, or "-" where it cannot be measured. The user-mode part is the client's own code
// (routing, go-redis, the runtime); the rest is system calls.
func perOp(cpu time.Duration, ops int64) string {
	if cpu <= 0 || ops == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fµs", float64(cpu)/float64(ops)/1e3)
}

// cpuPerOpNs is the process's CPU time per operation in ns, 0 where it
// cannot be measured.
func (r *result) cpuPerOpNs() float64 {
	if r.cpu <= 0 || r.t.ops == 0 {
		return 0
	}
	return float64(r.cpu) / float64(r.t.ops)
}

// ratioRow is a table row of each run's metric divided by the metric of
// the run of system ref ("-" where either is unknown).
func ratioRow(label string, results []*result, ref string, metric func(*result) float64) []string {
	var base float64
	for _, r := range results {
		if r.system == ref {
			base = metric(r)
		}
	}
	cells := []string{label}
	for _, r := range results {
		v := metric(r)
		if base <= 0 || v <= 0 {
			cells = append(cells, "-")
			continue
		}
		cells = append(cells, fmt.Sprintf("%.2fx", v/base))
	}
	return cells
}

// writeRounds prints, for each system in refs and each other system, the
// ratios of its throughput and CPU per operation to the ref's in every
// round (the runs of one round ran one after the other, on the same
// machine), and their medians: a run can be off by a third on a busy or
// small machine, and the median of the same-round ratios is what to quote.
func writeRounds(w io.Writer, rounds [][]*result, refs []string) {
	if len(rounds) == 0 || len(refs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nratios per round (%d rounds) and their medians:\n", len(rounds))
	t := &table{}
	head := []string{"", ""}
	for i := range rounds {
		head = append(head, fmt.Sprintf("round %d", i+1))
	}
	t.add(append(head, "median")...)
	metrics := []struct {
		name string
		f    func(*result) float64
	}{{"ops/s", (*result).throughput}, {"CPU per op", (*result).cpuPerOpNs}}
	for _, ref := range refs {
		for _, r := range rounds[0] {
			if r.system == ref {
				continue
			}
			for _, m := range metrics {
				cells := []string{r.system, m.name + " vs " + ref}
				var ratios []float64
				for _, round := range rounds {
					ratio := roundRatio(round, r.system, ref, m.f)
					if ratio <= 0 {
						cells = append(cells, "-")
						continue
					}
					ratios = append(ratios, ratio)
					cells = append(cells, fmt.Sprintf("%.2fx", ratio))
				}
				med := "-"
				if len(ratios) > 0 {
					med = fmt.Sprintf("%.2fx", median(ratios))
				}
				t.add(append(cells, med)...)
			}
		}
	}
	t.write(w)
}

// roundRatio is metric of system's run divided by metric of ref's run in
// one round, or 0 where either is unknown.
func roundRatio(round []*result, system, ref string, metric func(*result) float64) float64 {
	var v, base float64
	for _, r := range round {
		switch r.system {
		case system:
			v = metric(r)
		case ref:
			base = metric(r)
		}
	}
	if v <= 0 || base <= 0 {
		return 0
	}
	return v / base
}

// median is the median of xs (the mean of the middle two for an even
// count); xs is sorted in place.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
