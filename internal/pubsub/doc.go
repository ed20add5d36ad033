// Package pubsub gives a sharded client go-redis PubSubs that subscribe
// each channel where its PUBLISH goes.
//
// A *redis.PubSub reads one connection, so the PubSubs come from a front
// client (Hub.Front) whose dialer returns a local multiplexer (mux)
// instead of a socket: the mux speaks RESP2 to the PubSub (resp.go),
// places each channel on its owner's shard and each pattern on every
// shard, through one go-redis PubSub per shard and kind of connection (a
// link, RESP2 or RESP3 as the shard's client is configured), and merges
// what the links receive. Everything a PubSub does (Subscribe,
// Unsubscribe, Channel, Receive, Ping, its reconnects) works unchanged on
// top of it.
//
// Contract, as on one server: a subscription is confirmed once every
// shard it needs has confirmed it (or one failed and another confirmed
// it); replies go out in the order of the commands; the messages a shard
// sent before an unsubscribe arrive before its confirmation. A shard that
// fails is reported once per outage on the PubSub's Receive and
// resubscribed when it answers again; a shard that goes silent is found by
// a probe (Host.ProbeTimes). When the ring changes, subscriptions move to
// the new owners (and stay on the old ones while the change says so);
// Hub.Follow does it at once and waits for the new owners' confirmations.
//
// What the root provides is a Host: the current Ring (which Shard owns a
// channel, which shards a pattern needs, compared with == to see a
// change), the client's context and Close (Host.Go runs the goroutines
// Close waits for), and the probe times. A Shard gives its command client
// (links are its PubSubs, dialed through its hooks: IsLink tells the
// root's dial hook which connections are a link's), its name and whether
// it is marked down. The package knows nothing of topologies, backends or
// options. The root keeps a Lazy as a field of its client (the Hub is
// made on the first Subscribe; Lazy.Follow is what a membership change
// calls) and takes the probe times from ProbeTimes.
//
// Concurrency: a Hub and its muxes are safe for concurrent use. Each mux
// has one lock, which also guards its links' state; each link has two
// goroutines (a writer of subscription changes and probes, a reader) that
// end with the mux or the Host's context. Host methods are called under a
// mux's lock and must not call back into the package.
package pubsub
