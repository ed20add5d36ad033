package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/fleet"
	"github.com/redshard/redshard/internal/redistest"
	"github.com/redshard/redshard/registry"
)

// TestPubSubTorture: publishers and subscribers on several clients, many
// channels, every message numbered per (publisher, channel), while shards
// are killed and restarted, frozen and thawed, and added and removed with
// SetShards, or in a fleet with fleet.Apply (seeded:
// REDSHARD_TORTURE_SEED; REDSHARD_SOAK=1 runs longer).
// Every message whose PUBLISH succeeded is checked against every
// subscription confirmed before it was published (and not ended before it
// was done): it must arrive once, unless it was published while its
// channel's shard was down or frozen (from the fault until every
// subscriber hears that shard again, counted apart; also apart, those
// acknowledged less than faultMargin before the fault), or, across a change,
// by a client already on the new ring before the subscriber's SetShards
// had returned (counted apart; in a fleet nothing is excused across a
// change: a process acknowledges a phase only once subscribed on its
// rings). Nothing may arrive twice.
func TestPubSubTorture(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("REDSHARD_TORTURE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("REDSHARD_TORTURE_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("REDSHARD_TORTURE_SEED=%d", seed)
	chaosFor := 15 * time.Second
	if os.Getenv("REDSHARD_SOAK") == "1" {
		chaosFor = 5 * time.Minute
	}
	for i, fleet := range []bool{false, true} {
		name := "SetShards"
		if fleet {
			name = "fleet"
		}
		t.Run(name, func(t *testing.T) {
			s := seed + uint64(i)
			rng := rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
			tt := newTorture(t, rng, fleet)
			defer tt.close()
			tt.start()
			deadline := time.Now().Add(chaosFor)
			for time.Now().Before(deadline) {
				tt.quiet(time.Duration(200+rng.IntN(600)) * time.Millisecond)
				switch r := rng.IntN(10); {
				case r < 3:
					tt.kill()
				case r < 6:
					tt.freeze()
				default:
					tt.change()
				}
			}
			tt.quiet(300 * time.Millisecond)
			tt.stop()
			tt.report()
		})
	}
}

const (
	// faultMargin: a PUBLISH acknowledged this shortly before a fault may
	// not have reached every subscriber: the server answers the publisher
	// and writes the subscribers' copies one client after another, and a
	// SIGSTOP or SIGKILL can fall in between (seen in soaks: a message
	// acknowledged 0.4ms before a freeze reached two subscribers and not
	// the third). Such messages are counted apart.
	faultMargin = 50 * time.Millisecond

	tortureServers     = 4
	tortureClients     = 3
	torturePublishers  = 2 // per client
	tortureChannels    = 48
	tortureSubscribed  = 16 // channels of each client's channel PubSub at the start
	tortureChurnPeriod = 150 * time.Millisecond
)

type torture struct {
	t       *testing.T
	rng     *rand.Rand // the chaos's: used by the test goroutine only
	servers []*redistest.Server
	direct  []*redis.Client // one per server, for markers
	clients []*redshard.Client
	members []int // servers on the ring, by index

	fleet bool // clients follow a registry; changes go through fleet.Apply
	regDB *redis.Client
	regs  []registry.Registry // one per client, then the driver's

	subs []*tortureSub
	pubs []*torturePub

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	windows []faultWindow
	changes []changeRecord
	events  map[string]int // what the chaos did
	marker  atomic.Int64   // the id of the current barrier's markers

	timeline []timed // what happened, for the report of a loss; guarded by mu
}

// timed is one line of the timeline.
type timed struct {
	at   time.Time
	what string
}

// note adds a line to the timeline.
func (tt *torture) note(format string, args ...any) {
	tt.mu.Lock()
	tt.timeline = append(tt.timeline, timed{time.Now(), fmt.Sprintf(format, args...)})
	tt.mu.Unlock()
}

// faultWindow is a fault of one server, from just before it was made to
// the moment every subscriber heard that server again.
type faultWindow struct {
	kind     string
	from, to time.Time
	owned    map[string]bool // the channels the server owned
}

// changeRecord is one SetShards on every client.
type changeRecord struct {
	moving     map[string]bool // channels whose owner changed
	start, end []time.Time     // per client: when its SetShards was called and returned
}

// tortureSub is one PubSub and what it received.
type tortureSub struct {
	name    string
	client  int
	pattern bool // subscribed to "t:*", so to every channel
	ps      *redis.PubSub
	rng     *rand.Rand // its churn's

	mu        sync.Mutex
	intervals map[string][]subInterval // by channel ("*" for the pattern)
	got       map[msgID]int
	markers   map[string]int64 // by channel: the last marker id received
	errors    int              // shard failures reported by Receive
	strange   []string
}

type subInterval struct{ from, to time.Time } // to is zero while subscribed

type msgID struct {
	pub int
	ch  string
	seq int
}

type torturePub struct {
	id, client int
	rng        *rand.Rand
	seq        map[string]int
	sent       []sentMsg // touched by its goroutine until stop
	errs       int
}

type sentMsg struct {
	msgID
	start, end time.Time
}

func channelName(i int) string { return fmt.Sprintf("t:%d", i) }

func newTorture(t *testing.T, rng *rand.Rand, fleet bool) *torture {
	tt := &torture{t: t, rng: rng, events: map[string]int{}, fleet: fleet}
	tt.ctx, tt.cancel = context.WithCancel(context.Background())
	for i := range tortureServers {
		s := redistest.Start(t)
		tt.servers = append(tt.servers, s)
		tt.direct = append(tt.direct, redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1,
			DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond}))
		if i < tortureServers-1 {
			tt.members = append(tt.members, i)
		}
	}
	if fleet {
		tt.regDB = redistest.Start(t).Client(t)
		for range tortureClients + 1 {
			reg, err := registry.NewRedisOptions(tt.regDB, "redshard:registry:torture",
				&registry.Options{PollInterval: 100 * time.Millisecond, MemberTTL: 3 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			tt.regs = append(tt.regs, reg)
		}
		tt.apply(tt.members)
	}
	for i := range tortureClients {
		opt := &redshard.Options{
			// No retries: go-redis runs a PUBLISH again after a timeout or
			// a connection lost before its reply, and the first may have run
			// (a frozen server runs it when thawed): a duplicate that pub/sub
			// did not make. Each PUBLISH here runs at most once.
			ShardOptions: &redis.Options{ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1},
			Health:       &redshard.HealthOptions{Interval: 100 * time.Millisecond},
		}
		if fleet {
			opt.Registry, opt.Fleet = tt.regs[i], &redshard.FleetOptions{MemberID: fmt.Sprint("client", i)}
		} else {
			opt.Shards = tt.shards(tt.members)
		}
		c, err := redshard.NewClient(opt)
		if err != nil {
			t.Fatal(err)
		}
		tt.clients = append(tt.clients, c)
	}
	return tt
}

// apply publishes the ring of members through the registry, driving the
// change phase by phase (redshard apply).
func (tt *torture) apply(members []int) {
	var shards []map[string]string
	for _, i := range members {
		shards = append(shards, map[string]string{"name": fmt.Sprint("s", i), "addr": tt.servers[i].Addr()})
	}
	doc, err := json.Marshal(map[string]any{"shards": shards})
	if err != nil {
		tt.t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		// A shard just restarted may still be marked down in the driver's
		// client, failing Rebalance: Apply resumes (it is not what is tested).
		_, err := fleet.Apply(context.Background(), tt.regs[len(tt.regs)-1], doc, fleet.ApplyOptions{Driver: "torture",
			Client: &redshard.Options{Health: &redshard.HealthOptions{Interval: 100 * time.Millisecond}}})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tt.t.Fatalf("Apply %v: %v", members, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (tt *torture) shards(members []int) []redshard.Shard {
	var out []redshard.Shard
	for _, i := range members {
		out = append(out, redshard.Shard{Name: fmt.Sprint("s", i), Addr: tt.servers[i].Addr()})
	}
	return out
}

// owner returns the server index that owns ch on the current ring (the
// chaos makes one change at a time, so every client agrees between them).
func (tt *torture) owner(ch string) int {
	name := tt.clients[0].Ring().Lookup(ch)
	i, err := strconv.Atoi(strings.TrimPrefix(name, "s"))
	if err != nil {
		tt.t.Fatalf("shard name %q", name)
	}
	return i
}

func (tt *torture) ownedBy(server int) map[string]bool {
	out := map[string]bool{}
	for i := range tortureChannels {
		if ch := channelName(i); tt.owner(ch) == server {
			out[ch] = true
		}
	}
	return out
}

// start subscribes every PubSub (confirmed before any message is
// published) and starts the receivers, the churn and the publishers.
func (tt *torture) start() {
	t := tt.t
	for ci, c := range tt.clients {
		sub := &tortureSub{name: fmt.Sprint("client", ci), client: ci, rng: rand.New(rand.NewPCG(tt.rng.Uint64(), 1)),
			intervals: map[string][]subInterval{}, got: map[msgID]int{}, markers: map[string]int64{}}
		var chans []string
		for _, i := range sub.rng.Perm(tortureChannels)[:tortureSubscribed] {
			chans = append(chans, channelName(i))
		}
		sub.ps = c.Subscribe(tt.ctx, chans...)
		tt.subs = append(tt.subs, sub)
		if ci == 0 {
			p := &tortureSub{name: "client0-pattern", client: 0, pattern: true,
				intervals: map[string][]subInterval{}, got: map[msgID]int{}, markers: map[string]int64{}}
			p.ps = c.PSubscribe(tt.ctx, "t:*")
			tt.subs = append(tt.subs, p)
		}
	}
	for _, s := range tt.subs {
		tt.wg.Add(1)
		go func() { defer tt.wg.Done(); s.receive(tt) }()
	}
	// Every initial subscription confirmed before anything is published.
	tt.waitUntil("the initial subscriptions", 10*time.Second, func() bool {
		for _, s := range tt.subs {
			s.mu.Lock()
			n := len(s.intervals)
			s.mu.Unlock()
			if want := tortureSubscribed; s.pattern && n != 1 || !s.pattern && n != want {
				return false
			}
		}
		return true
	})
	for _, s := range tt.subs {
		if !s.pattern {
			tt.wg.Add(1)
			go func() { defer tt.wg.Done(); s.churn(tt) }()
		}
	}
	if tt.fleet {
		tt.wg.Add(1)
		go func() { defer tt.wg.Done(); tt.watchFleet() }()
	}
	for ci := range tt.clients {
		for range torturePublishers {
			p := &torturePub{id: len(tt.pubs), client: ci, rng: rand.New(rand.NewPCG(tt.rng.Uint64(), 2)), seq: map[string]int{}}
			tt.pubs = append(tt.pubs, p)
			tt.wg.Add(1)
			go func() { defer tt.wg.Done(); p.run(tt) }()
		}
	}
	t.Logf("%d servers (%d on the ring), %d clients, %d publishers, %d subscriptions, %d channels",
		tortureServers, len(tt.members), tortureClients, len(tt.pubs), len(tt.subs), tortureChannels)
}

// receive records what the PubSub receives until it is closed.
func (s *tortureSub) receive(tt *torture) {
	for {
		msg, err := s.ps.ReceiveTimeout(context.Background(), 500*time.Millisecond)
		now := time.Now()
		if err != nil {
			if tt.ctx.Err() != nil {
				return
			}
			var rerr redis.Error
			var ne interface{ Timeout() bool }
			switch {
			case errors.As(err, &rerr):
				s.mu.Lock()
				s.errors++
				s.mu.Unlock()
				tt.note("%s Receive: %v", s.name, err)
			case errors.As(err, &ne) && ne.Timeout():
			default:
				s.mu.Lock()
				s.strange = append(s.strange, "receive: "+err.Error())
				s.mu.Unlock()
				time.Sleep(10 * time.Millisecond) // a closed PubSub: the test is ending or failed
			}
			continue
		}
		s.mu.Lock()
		switch m := msg.(type) {
		case *redis.Subscription:
			name := m.Channel
			if s.pattern {
				name = "*"
			}
			if m.Kind == "subscribe" || m.Kind == "psubscribe" {
				iv := s.intervals[name]
				if len(iv) == 0 || !iv[len(iv)-1].to.IsZero() {
					s.intervals[name] = append(iv, subInterval{from: now})
				}
			}
		case *redis.Message:
			kind, rest, _ := strings.Cut(m.Payload, "/")
			switch kind {
			case "m":
				id, _ := strconv.ParseInt(rest, 10, 64)
				s.markers[m.Channel] = max(s.markers[m.Channel], id)
			case "d":
				pub, seq, _ := strings.Cut(rest, "/")
				p, err1 := strconv.Atoi(pub)
				q, err2 := strconv.Atoi(seq)
				if err1 != nil || err2 != nil {
					s.strange = append(s.strange, "payload "+m.Payload)
					break
				}
				s.got[msgID{p, m.Channel, q}]++
			default:
				s.strange = append(s.strange, "payload "+m.Payload)
			}
		}
		s.mu.Unlock()
	}
}

// churn subscribes to a channel not subscribed yet, or unsubscribes one of
// those, every tortureChurnPeriod.
func (s *tortureSub) churn(tt *torture) {
	tick := time.NewTicker(tortureChurnPeriod)
	defer tick.Stop()
	for {
		select {
		case <-tt.ctx.Done():
			return
		case <-tick.C:
		}
		ch := channelName(s.rng.IntN(tortureChannels))
		s.mu.Lock()
		iv := s.intervals[ch]
		on := len(iv) > 0 && iv[len(iv)-1].to.IsZero()
		if on {
			iv[len(iv)-1].to = time.Now() // before the UNSUBSCRIBE: nothing published after is expected
		}
		s.mu.Unlock()
		var err error
		if on {
			err = s.ps.Unsubscribe(tt.ctx, ch)
		} else {
			err = s.ps.Subscribe(tt.ctx, ch) // the interval starts at its confirmation (receive)
		}
		if err != nil && tt.ctx.Err() == nil {
			s.mu.Lock()
			s.strange = append(s.strange, fmt.Sprintf("churn %s: %v", ch, err))
			s.mu.Unlock()
		}
	}
}

func (p *torturePub) run(tt *torture) {
	c := tt.clients[p.client]
	tick := time.NewTicker(3 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tt.ctx.Done():
			return
		case <-tick.C:
		}
		ch := channelName(p.rng.IntN(tortureChannels))
		p.seq[ch]++
		id := msgID{p.id, ch, p.seq[ch]}
		ctx, cancel := context.WithTimeout(tt.ctx, 5*time.Second)
		start := time.Now()
		err := c.Publish(ctx, ch, fmt.Sprintf("d/%d/%d", id.pub, id.seq)).Err()
		end := time.Now()
		cancel()
		if err != nil {
			p.errs++
			continue
		}
		p.sent = append(p.sent, sentMsg{msgID: id, start: start, end: end})
	}
}

// watchFleet notes every client's phase and fence as they change.
func (tt *torture) watchFleet() {
	last := make([]redshard.FleetStatus, len(tt.clients))
	for tt.ctx.Err() == nil {
		for i, c := range tt.clients {
			st, _ := c.FleetStatus()
			if st.Version != last[i].Version || st.Fenced != last[i].Fenced {
				tt.note("client%d on %v fenced=%v", i, st.Version, st.Fenced)
				last[i] = st
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// quiet lets the traffic run for d.
func (tt *torture) quiet(d time.Duration) { time.Sleep(d) }

func (tt *torture) waitUntil(what string, timeout time.Duration, cond func() bool) {
	tt.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tt.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// barrier publishes markers on the channels of the given servers, straight
// to their owners, until every subscription confirmed there has received
// one: then every subscriber hears those servers again.
func (tt *torture) barrier(what string, servers []int) {
	id := tt.marker.Add(1)
	payload := fmt.Sprint("m/", id)
	chans := map[string]int{}
	for _, srv := range servers {
		for ch := range tt.ownedBy(srv) {
			chans[ch] = srv
		}
	}
	done := func() bool {
		for _, s := range tt.subs {
			s.mu.Lock()
			for ch := range chans {
				iv := s.intervals[ch]
				if s.pattern {
					iv = s.intervals["*"]
				}
				if len(iv) > 0 && iv[len(iv)-1].to.IsZero() && s.markers[ch] < id {
					s.mu.Unlock()
					return false
				}
			}
			s.mu.Unlock()
		}
		return true
	}
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			tt.t.Fatalf("%s: the subscribers did not hear servers %v again within 30s", what, servers)
		}
		for ch, srv := range chans {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = tt.direct[srv].Publish(ctx, ch, payload).Err() // a server still coming back: the next round
			cancel()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill kills a server of the ring, restarts it after a while, and waits
// until every subscriber hears it again.
func (tt *torture) kill() {
	srv := tt.members[tt.rng.IntN(len(tt.members))]
	down := time.Duration(50+tt.rng.IntN(1500)) * time.Millisecond
	w := faultWindow{kind: "kill", from: time.Now(), owned: tt.ownedBy(srv)}
	tt.note("kill s%d", srv)
	tt.servers[srv].Kill()
	time.Sleep(down)
	tt.note("restart s%d", srv)
	tt.servers[srv].Restart(tt.t)
	tt.note("s%d restarted", srv)
	tt.barrier("after a restart", []int{srv})
	w.to = time.Now()
	tt.record(w)
}

// freeze stops a server of the ring with SIGSTOP for a while (shorter
// or longer than the Pub/Sub probe takes to notice).
func (tt *torture) freeze() {
	srv := tt.members[tt.rng.IntN(len(tt.members))]
	frozen := time.Duration(100+tt.rng.IntN(3000)) * time.Millisecond
	w := faultWindow{kind: "freeze", from: time.Now(), owned: tt.ownedBy(srv)}
	tt.note("freeze s%d", srv)
	tt.servers[srv].Freeze()
	time.Sleep(frozen)
	tt.note("thaw s%d", srv)
	tt.servers[srv].Thaw()
	tt.barrier("after a thaw", []int{srv})
	w.to = time.Now()
	tt.record(w)
}

func (tt *torture) record(w faultWindow) {
	tt.note("%s window closed (every subscriber heard the server again)", w.kind)
	tt.mu.Lock()
	tt.windows = append(tt.windows, w)
	tt.events[w.kind]++
	tt.mu.Unlock()
}

// change adds a server to the ring or removes one (never below two), with
// SetShards on every client in a random order, then Rebalance on each,
// which ends the change (the old owners' subscriptions are dropped).
func (tt *torture) change() {
	next := slices.Clone(tt.members)
	kind := "add"
	if out := tortureServers - len(tt.members); out == 0 || len(tt.members) > 2 && tt.rng.IntN(2) == 0 {
		kind = "remove"
		i := tt.rng.IntN(len(next))
		next = slices.Delete(next, i, i+1)
	} else {
		for i := range tortureServers {
			if !slices.Contains(next, i) {
				next = append(next, i)
				break
			}
		}
		slices.Sort(next)
	}
	before := map[string]int{}
	for i := range tortureChannels {
		before[channelName(i)] = tt.owner(channelName(i))
	}
	tt.note("change %s: %v -> %v", kind, tt.members, next)
	if tt.fleet {
		tt.apply(next)
		tt.note("apply %v done", next)
		tt.members = next
		tt.mu.Lock()
		tt.events[kind]++
		tt.mu.Unlock()
		return
	}
	rec := changeRecord{moving: map[string]bool{}, start: make([]time.Time, len(tt.clients)), end: make([]time.Time, len(tt.clients))}
	for _, ci := range tt.rng.Perm(len(tt.clients)) {
		rec.start[ci] = time.Now()
		if err := tt.clients[ci].SetShards(context.Background(), tt.shards(next)); err != nil {
			tt.t.Fatalf("SetShards to %v on client %d: %v", next, ci, err)
		}
		rec.end[ci] = time.Now()
		tt.note("client%d SetShards returned", ci)
	}
	tt.members = next
	for ch, o := range before {
		if tt.owner(ch) != o {
			rec.moving[ch] = true
		}
	}
	tt.mu.Lock()
	tt.changes = append(tt.changes, rec)
	tt.events[kind]++
	tt.mu.Unlock()
	tt.quiet(time.Duration(tt.rng.IntN(300)) * time.Millisecond) // traffic on both rings
	tt.note("rebalance")
	for ci, c := range tt.clients {
		deadline := time.Now().Add(20 * time.Second)
		for {
			// A shard just restarted may still be marked down: Rebalance
			// fails then, and is run again (it is not what is tested).
			_, err := c.Rebalance(context.Background(), redshard.RebalanceOptions{})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				tt.t.Fatalf("Rebalance on client %d: %v", ci, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// stop ends the traffic and waits until every subscriber has heard every
// server of the ring once more, so that everything published before has
// arrived, then closes the PubSubs.
func (tt *torture) stop() {
	tt.cancel()
	// The publishers and the churn stop with the context; the receivers
	// go on until their PubSub is closed.
	tt.barrier("at the end", tt.members)
	for _, s := range tt.subs {
		_ = s.ps.Close()
	}
	tt.wg.Wait()
}

func (tt *torture) close() {
	tt.cancel()
	for _, s := range tt.subs {
		_ = s.ps.Close()
	}
	tt.wg.Wait()
	for _, c := range tt.clients {
		_ = c.Close()
	}
	for _, d := range tt.direct {
		_ = d.Close()
	}
	for _, r := range tt.regs {
		_ = r.Close()
	}
}

// excused says why a message need not have reached sub: "fault" (its
// channel's server was down or frozen while it was published), "margin"
// (acknowledged less than faultMargin before such a fault), "change"
// (published on the new ring before sub's client had switched), or "".
func (tt *torture) excused(m sentMsg, pubClient int, sub *tortureSub) string {
	for _, w := range tt.windows {
		if w.owned[m.ch] && m.end.After(w.from) && m.start.Before(w.to) {
			return "fault"
		}
	}
	for _, w := range tt.windows {
		if w.owned[m.ch] && m.end.After(w.from.Add(-faultMargin)) && m.start.Before(w.to) {
			return "margin"
		}
	}
	for _, c := range tt.changes {
		if c.moving[m.ch] && !m.start.Before(c.start[pubClient]) && m.start.Before(c.end[sub.client]) {
			return "change"
		}
	}
	return ""
}

// subscribed reports whether sub's subscription covering ch was confirmed
// before m was published and not ended before m was done.
func (sub *tortureSub) subscribed(m sentMsg) bool {
	name := m.ch
	if sub.pattern {
		name = "*"
	}
	for _, iv := range sub.intervals[name] {
		if !iv.from.After(m.start) && (iv.to.IsZero() || iv.to.After(m.end)) {
			return true
		}
	}
	return false
}

func (tt *torture) report() {
	t := tt.t
	var sent, pubErrs, expected, delivered, lost, excusedFault, excusedMargin, excusedChange, lateButExcused, dups, failures int
	var lostSamples []string
	var firstLost time.Time
	for _, p := range tt.pubs {
		pubErrs += p.errs
		sent += len(p.sent)
		for _, m := range p.sent {
			for _, s := range tt.subs {
				if !s.subscribed(m) {
					continue
				}
				n := s.got[m.msgID]
				switch why := tt.excused(m, p.client, s); {
				case why == "" && n > 0:
					expected++
					delivered++
				case why == "":
					expected++
					lost++
					if firstLost.IsZero() || m.start.Before(firstLost) {
						firstLost = m.start
					}
					if len(lostSamples) < 10 {
						prev, next := m.msgID, m.msgID
						prev.seq--
						next.seq++
						var others []string
						for _, o := range tt.subs {
							if o != s && o.subscribed(m) {
								others = append(others, fmt.Sprintf("%s %d", o.name, o.got[m.msgID]))
							}
						}
						lostSamples = append(lostSamples, fmt.Sprintf("%s missed %s #%d of publisher %d (client %d), published %s..%s; "+
							"it got #%d %d times, #%d %d times; the other subscribers got it: %v",
							s.name, m.ch, m.seq, m.pub, p.client, m.start.Format("15:04:05.000000"), m.end.Format("15:04:05.000000"),
							prev.seq, s.got[prev], next.seq, s.got[next], others))
					}
				case n > 0:
					lateButExcused++
				case why == "fault":
					excusedFault++
				case why == "margin":
					excusedMargin++
				default:
					excusedChange++
				}
			}
		}
	}
	var strange []string
	for _, s := range tt.subs {
		failures += s.errors
		for id, n := range s.got {
			if n > 1 {
				dups += n - 1
				if len(strange) < 10 {
					strange = append(strange, fmt.Sprintf("%s got %s #%d of publisher %d %d times", s.name, id.ch, id.seq, id.pub, n))
				}
			}
		}
		strange = append(strange, s.strange...)
	}
	t.Logf("events: %v; messages published: %d (PUBLISH failed: %d); deliveries expected: %d, delivered: %d, lost: %d; "+
		"not delivered while the channel's shard was down or frozen: %d; acknowledged less than %v before that and not delivered: %d; "+
		"not delivered across a change before the subscriber's SetShards returned: %d; "+
		"delivered although excused: %d; duplicates: %d; shard failures reported by Receive: %d",
		tt.events, sent, pubErrs, expected, delivered, lost, excusedFault, faultMargin, excusedMargin, excusedChange, lateButExcused, dups, failures)
	for _, s := range lostSamples {
		t.Log("lost: ", s)
	}
	if !firstLost.IsZero() {
		t.Logf("timeline from 3s before the first lost message to 1s after (%s):", firstLost.Format("15:04:05.000000"))
		for _, e := range tt.timeline {
			if e.at.After(firstLost.Add(-3*time.Second)) && e.at.Before(firstLost.Add(time.Second)) {
				t.Logf("  %s %s", e.at.Format("15:04:05.000000"), e.what)
			}
		}
	}
	for _, s := range strange {
		t.Log(s)
	}
	if lost != 0 || dups != 0 {
		t.Errorf("lost %d, duplicated %d (seed in the log: REDSHARD_TORTURE_SEED)", lost, dups)
	}
	if expected == 0 {
		t.Error("no delivery was expected: the test checked nothing")
	}
}
