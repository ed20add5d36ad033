package redshard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Shard is one Redis server (or one Sentinel-managed primary) on the ring.
type Shard struct {
	// Name is the shard's stable identity on the ring: keys follow names, not
	// addresses, so a shard can move to a new address without moving keys,
	// and renaming a shard moves its keys. Required, unique.
	Name string

	// Addr is host:port ("10.0.0.1:6379", "[::1]:6379", "cache-a:6379"),
	// or the path of a Unix socket: one starting with "/", or any path
	// when Shard.Options.Network is "unix". Anything else is ErrInvalidAddr.
	// Required unless Failover is set.
	Addr string

	// Weight is the shard's relative capacity: a shard of weight 2 owns
	// twice the keys of a shard of weight 1. Default (0) 1.
	Weight float64

	// Options, if set, replaces Options.ShardOptions for this shard (its Addr
	// is filled from Shard.Addr when empty).
	Options *redis.Options

	// Failover, if set, makes this shard a Sentinel-managed primary: the
	// shard's client is redis.NewFailoverClient(Failover) (or
	// Options.NewFailoverShardClient's), Options.ShardOptions does not
	// apply to it, and Addr may be empty. High availability inside a
	// shard is Sentinel's job; redshard only decides which shard owns a
	// key. The shard's identity is its MasterName: a new list of Sentinels
	// for the same master moves no key. A Sentinel shard of a registry's
	// document gets Options.FailoverShardOptions' settings (see there);
	// in a configuration file it is written
	// {"name": "a", "sentinel": {"master": "m", "addrs": ["10.0.0.1:26379"]}}.
	Failover *redis.FailoverOptions
}

// String names the shard and its address. It never prints credentials.
func (s Shard) String() string {
	if s.Failover != nil {
		return fmt.Sprintf("%s(sentinel master %q)", s.Name, s.Failover.MasterName)
	}
	return fmt.Sprintf("%s(%s)", s.Name, s.Addr)
}

// identity names the server a shard is, whatever its name: its address in
// a canonical spelling (see canonicalAddr), or the Sentinel master it
// follows. Two shards of one list must not share it, and keys move between
// shards only when their identities differ.
func (s Shard) identity() string {
	if s.Failover != nil {
		return "sentinel:" + s.Failover.MasterName
	}
	return canonicalAddr(s.Addr)
}

// canonicalAddr spells host:port so that the spellings of one loopback
// server compare equal: the host lower-cased, IP literals in their
// canonical form (IPv4-mapped IPv6 unmapped), and "localhost", "::1",
// "0.0.0.0" and "::" as 127.0.0.1, since a server listening on loopback is
// reached through all of them. Host names are not resolved (NewClient does
// not use the network): two DNS names of one server are not detected.
func canonicalAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return strings.ToLower(addr)
	}
	host = strings.ToLower(host)
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		if ip.IsLoopback() && ip.Is6() || ip.IsUnspecified() {
			ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		}
		host = ip.String()
	} else if host == "localhost" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// checkAddr reports why s.Addr cannot be dialled, if it cannot: it must be
// host:port, with a numeric port in [1, 65535] and a host that is an IP
// literal or a host name, or a Unix socket path (go-redis dials an Addr
// starting with "/" as one, and any Addr when Shard.Options.Network is "unix").
// A Sentinel shard's Addr is not used. Nothing is resolved: NewClient does
// not use the network.
func checkAddr(s Shard) error {
	if s.Failover != nil {
		return nil
	}
	if strings.HasPrefix(s.Addr, "/") || s.Options != nil && s.Options.Network == "unix" {
		return nil
	}
	host, port, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port (%v)", s.Addr, unquoteAddrErr(err))
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("%q: the port %q is not a number in [1, 65535]", s.Addr, port)
	}
	if _, err := netip.ParseAddr(host); err == nil || validHostName(host) {
		return nil
	}
	return fmt.Errorf("%q: %q is neither an IP address nor a host name", s.Addr, host)
}

// unquoteAddrErr is net.SplitHostPort's reason without the address, which
// checkAddr's message already quotes.
func unquoteAddrErr(err error) string {
	var ae *net.AddrError
	if errors.As(err, &ae) {
		return ae.Err
	}
	return err.Error()
}

// validHostName reports whether h can be a DNS host name: dot-separated
// labels of letters, digits, '-' and '_' (Docker and Kubernetes service
// names use it). The empty host ("":6379) is the local system, as for
// net.Dial.
func validHostName(h string) bool {
	if h == "" {
		return true
	}
	if len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}
