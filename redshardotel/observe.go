package redshardotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/redshard/redshard"
)

// observer reports a client's Stats and LoadStats from one callback, so
// that every collection reads them once and its values agree with each
// other. Its instruments are set at construction and only read after.
type observer struct {
	c           *redshard.Client
	hotKeyNames bool
	user        []attribute.KeyValue // WithAttributes
	all         metric.MeasurementOption
	instruments []metric.Observable
	err         error // of creating the instruments

	// result=... sets, built once
	hit, miss, won, waited, timedOut metric.MeasurementOption

	// Ring and shards
	shardUp                 metric.Int64ObservableGauge
	shardWeight, shardShare metric.Float64ObservableGauge
	epoch                   metric.Int64ObservableGauge
	shardDowns, standIn     metric.Int64ObservableCounter
	outageCleaned           metric.Int64ObservableCounter

	// Membership changes
	handoffActive               metric.Int64ObservableGauge
	handoffMoved, handoffErrors metric.Int64ObservableCounter
	rebRunning, rebEpoch        metric.Int64ObservableGauge
	rebScanned, rebMoved        metric.Int64ObservableGauge
	rebFailed, rebEstimate      metric.Int64ObservableGauge
	rebRuns                     metric.Int64ObservableCounter

	// Hot keys
	hotCount                          metric.Int64ObservableGauge
	hotRate                           metric.Float64ObservableGauge // nil without WithHotKeyNames
	csc, hotCoalesced                 metric.Int64ObservableCounter
	splitReads, splitFallbacks, fills metric.Int64ObservableCounter
	invalidations, trackingLost       metric.Int64ObservableCounter

	// GetOrLoad
	loadRequests, loadCoalesced, loadCanceled metric.Int64ObservableCounter
	loads, leases, leaseWaits                 metric.Int64ObservableCounter
	loadErrors, storeErrors                   metric.Int64ObservableCounter
}

func newObserver(m metric.Meter, c *redshard.Client, cfg *config) (*observer, error) {
	o := &observer{c: c, hotKeyNames: cfg.hotKeyNames, user: cfg.attrs}
	o.all = metric.WithAttributeSet(attribute.NewSet(cfg.attrs...))
	o.hit, o.miss = o.result("hit"), o.result("miss")
	o.won, o.waited, o.timedOut = o.result("won"), o.result("waited"), o.result("timeout")

	o.shardUp = o.gauge(m, "redshard.shard.up", "{shard}",
		"1 while the shard is up, 0 while the health monitor has it marked down.")
	o.shardWeight = o.fgauge(m, "redshard.shard.weight", "1", "The shard's configured weight.")
	o.shardShare = o.fgauge(m, "redshard.shard.share", "1", "The fraction of the hash space the shard owns.")
	o.epoch = o.gauge(m, "redshard.ring.epoch", "1",
		"The ring's epoch: 1 after NewClient, +1 per SetShards.")
	// Phase: when fleet phases land, the phase of the change in flight is
	// reported here, beside the epoch it belongs to (redshard.ring.phase).
	o.shardDowns = o.counter(m, "redshard.shard.downs", "{event}", "Times a shard was marked down.")
	o.standIn = o.counter(m, "redshard.failover.commands", "{command}",
		"Commands a stand-in shard served for a down one.")
	o.outageCleaned = o.counter(m, "redshard.outage.keys.cleaned", "{key}",
		"Keys deleted from returning shards and their stand-ins because they were written during an outage.")

	o.handoffActive = o.gauge(m, "redshard.handoff.active", "1",
		"1 while keys are still brought over from their previous owners after SetShards.")
	o.handoffMoved = o.counter(m, "redshard.handoff.moved", "{key}",
		"Keys brought over from a previous owner on first use.")
	o.handoffErrors = o.counter(m, "redshard.handoff.errors", "{error}", "Handoff migrations that failed.")
	o.rebRunning = o.gauge(m, "redshard.rebalance.running", "1", "1 while a Rebalance is running.")
	o.rebRuns = o.counter(m, "redshard.rebalance.runs", "{run}", "Rebalance calls that started scanning.")
	o.rebEpoch = o.gauge(m, "redshard.rebalance.epoch", "1", "The ring epoch the current or last Rebalance moves keys for.")
	o.rebScanned = o.gauge(m, "redshard.rebalance.scanned", "{key}", "Keys scanned by the current or last Rebalance.")
	o.rebMoved = o.gauge(m, "redshard.rebalance.moved", "{key}", "Keys moved by the current or last Rebalance.")
	o.rebFailed = o.gauge(m, "redshard.rebalance.failed", "{key}", "Keys the current or last Rebalance failed to move.")
	o.rebEstimate = o.gauge(m, "redshard.rebalance.estimate", "{key}",
		"The estimated number of keys the current or last Rebalance scans.")

	o.hotCount = o.gauge(m, "redshard.hotkeys.count", "{key}", "Keys hot now (at most 20).")
	if cfg.hotKeyNames {
		o.hotRate = o.fgauge(m, "redshard.hotkeys.rate", "{command}/s",
			"The estimated rate of each hot key, by name (WithHotKeyNames).")
	}
	o.csc = o.counter(m, "redis.client.csc.requests", "{request}",
		"Reads of hot keys answered from the local cache (result=hit) or read from the shard (result=miss).")
	o.hotCoalesced = o.counter(m, "redshard.hot.coalesced", "{request}",
		"Hot reads and copy fills that waited for another caller's identical request instead of sending their own.")
	o.splitReads = o.counter(m, "redshard.hot.split.reads", "{request}", "Hot reads answered by a split copy.")
	o.splitFallbacks = o.counter(m, "redshard.hot.split.fallbacks", "{request}",
		"Hot reads a split copy could not settle, answered by the owner.")
	o.fills = o.counter(m, "redshard.hot.copy.fills", "{copy}", "Split copies made.")
	o.invalidations = o.counter(m, "redshard.hot.invalidations", "{key}",
		"Keys named by the shards' invalidation messages (CLIENT TRACKING).")
	o.trackingLost = o.counter(m, "redshard.hot.tracking.lost", "{event}",
		"Times a shard's cached replies were all dropped because invalidations may have been missed.")

	o.loadRequests = o.counter(m, "redshard.load.requests", "{request}",
		"GetOrLoad calls answered by their first GET (result=hit) or that joined a load flight (result=miss).")
	o.loadCoalesced = o.counter(m, "redshard.load.coalesced", "{request}",
		"GetOrLoad calls that got the result of another caller's flight.")
	o.loadCanceled = o.counter(m, "redshard.load.canceled", "{request}",
		"GetOrLoad calls whose context ended while they waited for a flight.")
	o.loads = o.counter(m, "redshard.load.loads", "{call}", "Calls of a GetOrLoad load function.")
	o.leases = o.counter(m, "redshard.load.leases", "{flight}",
		"Load flights that took the fleet-wide lease (result=won) or found it taken and waited (result=waited).")
	o.leaseWaits = o.counter(m, "redshard.load.lease.waits", "{wait}",
		"Lease waits that saw the value appear (result=hit) or ended after Wait and loaded anyway (result=timeout).")
	o.loadErrors = o.counter(m, "redshard.load.errors", "{flight}",
		"Load flights that failed: a load error or panic, or a Redis error.")
	o.storeErrors = o.counter(m, "redshard.load.store.errors", "{value}",
		"Loaded values returned but not cached because the SET failed.")
	return o, o.err
}

// result is the user's attributes with result=v.
func (o *observer) result(v string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue(nil), o.user...), ResultKey.String(v))...))
}

func (o *observer) add(i metric.Observable, err error) {
	o.err = errors.Join(o.err, err)
	if err == nil {
		o.instruments = append(o.instruments, i)
	}
}

func (o *observer) gauge(m metric.Meter, name, unit, desc string) metric.Int64ObservableGauge {
	i, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	o.add(i, err)
	return i
}

func (o *observer) fgauge(m metric.Meter, name, unit, desc string) metric.Float64ObservableGauge {
	i, err := m.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	o.add(i, err)
	return i
}

func (o *observer) counter(m metric.Meter, name, unit, desc string) metric.Int64ObservableCounter {
	i, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	o.add(i, err)
	return i
}

// observe is the callback: one Stats and one LoadStats per collection.
func (o *observer) observe(_ context.Context, ob metric.Observer) error {
	st := o.c.Stats()
	all := o.all

	for _, s := range st.Shards {
		set := metric.WithAttributeSet(attribute.NewSet(append(append(
			[]attribute.KeyValue{ShardKey.String(s.Name)}, serverAttrs(s.Addr)...), o.user...)...))
		ob.ObserveInt64(o.shardUp, flag(!s.Down), set)
		ob.ObserveFloat64(o.shardWeight, s.Weight, set)
		ob.ObserveFloat64(o.shardShare, s.Share, set)
	}
	ob.ObserveInt64(o.epoch, int64(st.Epoch), all)
	ob.ObserveInt64(o.shardDowns, st.ShardDowns, all)
	ob.ObserveInt64(o.standIn, st.StandInCommands, all)
	ob.ObserveInt64(o.outageCleaned, st.OutageKeysCleaned, all)

	ob.ObserveInt64(o.handoffActive, flag(st.HandoffActive), all)
	ob.ObserveInt64(o.handoffMoved, st.HandoffMoved, all)
	ob.ObserveInt64(o.handoffErrors, st.HandoffErrors, all)
	r := st.Rebalance
	ob.ObserveInt64(o.rebRunning, flag(r.Running), all)
	ob.ObserveInt64(o.rebRuns, r.Runs, all)
	ob.ObserveInt64(o.rebEpoch, int64(r.Epoch), all)
	ob.ObserveInt64(o.rebScanned, r.Scanned, all)
	ob.ObserveInt64(o.rebMoved, r.Moved, all)
	ob.ObserveInt64(o.rebFailed, r.Failed, all)
	ob.ObserveInt64(o.rebEstimate, r.Total, all)

	if h := st.Hot; h.Mitigation != 0 { // else hot keys are off: nothing to report
		ob.ObserveInt64(o.hotCount, int64(len(h.Keys)), all)
		if o.hotRate != nil {
			for _, k := range h.Keys {
				ob.ObserveFloat64(o.hotRate, k.Rate, metric.WithAttributeSet(attribute.NewSet(
					append([]attribute.KeyValue{HotKeyKey.String(k.Key)}, o.user...)...)))
			}
		}
		ob.ObserveInt64(o.hotCoalesced, h.Coalesced, all)
		switch h.Mitigation {
		case redshard.LocalCache:
			ob.ObserveInt64(o.csc, h.CacheHits, o.hit)
			ob.ObserveInt64(o.csc, h.CacheMisses, o.miss)
			ob.ObserveInt64(o.invalidations, h.Invalidations, all)
			ob.ObserveInt64(o.trackingLost, h.TrackingLost, all)
		case redshard.SplitCopies:
			ob.ObserveInt64(o.splitReads, h.SplitReads, all)
			ob.ObserveInt64(o.splitFallbacks, h.SplitFallbacks, all)
			ob.ObserveInt64(o.fills, h.CopyFills, all)
		}
	}

	ld := o.c.LoadStats()
	ob.ObserveInt64(o.loadRequests, int64(ld.Hits), o.hit)
	ob.ObserveInt64(o.loadRequests, int64(ld.Misses), o.miss)
	ob.ObserveInt64(o.loadCoalesced, int64(ld.Coalesced), all)
	ob.ObserveInt64(o.loadCanceled, int64(ld.Canceled), all)
	ob.ObserveInt64(o.loads, int64(ld.Loads), all)
	ob.ObserveInt64(o.leases, int64(ld.LeaseWins), o.won)
	ob.ObserveInt64(o.leases, int64(ld.LeaseWaits), o.waited)
	ob.ObserveInt64(o.leaseWaits, int64(ld.LeaseWaitHits), o.hit)
	ob.ObserveInt64(o.leaseWaits, int64(ld.LeaseTimeouts), o.timedOut)
	ob.ObserveInt64(o.loadErrors, int64(ld.Errors), all)
	ob.ObserveInt64(o.storeErrors, int64(ld.StoreErrors), all)
	return nil
}

// flag is 1 for true, 0 for false.
func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
