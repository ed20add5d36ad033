package ring

import (
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
)

const (
	// DefaultVnodesPerWeight is the number of points a node of weight 1 gets
	// when Config.VnodesPerWeight is 0. See the package documentation for why.
	DefaultVnodesPerWeight = 8192

	// DefaultVnodesPerWeight2 is the number of points a node of weight 1
	// gets under Recipe2 when Config.VnodesPerWeight is 0. See the package
	// documentation for why.
	DefaultVnodesPerWeight2 = 1024

	// MaxPoints caps the total number of points on a ring; a ring that large
	// takes about 540 MiB. New returns ErrTooManyPoints beyond it.
	MaxPoints = 1 << 26
)

// The placement recipes (see the package documentation). A Config names
// one; the zero Config.Recipe means Recipe1, so that every ring built
// before Recipe2 existed keeps its placement.
const (
	// Recipe1: a key belongs to the first point at or after its position.
	Recipe1 = 1
	// Recipe2: a key belongs to the nearest point, which halves the
	// variance of the shares, so that an eighth of Recipe1's default points
	// balance as well at 10 nodes and better at 1000.
	Recipe2 = 2
)

// Node is a physical shard on the ring. The zero Weight means 1; the zero
// Node, with no Name, is rejected by New.
type Node struct {
	Name   string  // unique, non-empty
	Weight float64 // relative capacity; 0 means 1; negative, NaN or Inf is an error
}

// Config tunes a ring. A nil *Config, like the zero Config, gives the
// defaults. Every client of a fleet must use the same Config to agree on
// placement.
type Config struct {
	// Recipe is the placement recipe, Recipe1 or Recipe2. Default (0):
	// Recipe1.
	Recipe int
	// VnodesPerWeight is the number of points per unit of weight.
	// Default (0): DefaultVnodesPerWeight under Recipe1,
	// DefaultVnodesPerWeight2 under Recipe2.
	VnodesPerWeight int
	// Hash maps a string to 64 bits; only the top 32 bits are used. It must be
	// a pure function, safe for concurrent use (New and With call it from
	// several goroutines) and must not panic. Default (nil):
	// xxhash.Sum64String.
	Hash func(string) uint64
}

// Ring maps keys to nodes. It is immutable after New and safe for concurrent
// use by any number of goroutines. The zero Ring (and a nil *Ring) is an empty
// ring: it owns nothing, Lookup returns "", LookupIndex returns -1.
type Ring struct {
	nodes  []Node              // sorted by Name, Weight normalised
	hash   func(string) uint64 // nil means xxhash
	vpw    int
	recipe int

	// The circle is cut into 2^bits equal buckets by the top bits of a
	// position, bits chosen so that a bucket holds two to four points on
	// average. A point is packed into a uint32 as an entry: its position's
	// low 32-bits bits, then ownerBits bits of node index, so that within a
	// bucket entries compare as integers in point order. rec[b], 16 bytes,
	// holds the entries of bucket b's first three points (see bucket) and
	// where its other points start in rest, which holds them in circle
	// order; rec[buckets] holds the first point (the wrap) and len(rest). A
	// lookup reads rec[b] and the start of rec[b+1], usually one cache
	// line, and touches rest only when the key lies past the third point of
	// a bucket that has more. The records cost more memory than a plain
	// array of entries with an index of bucket starts (5.4 to 8.4 bytes a
	// point instead of 4.5 to 5), but that layout cost two dependent reads
	// of memory per lookup, and rings of a few hundred thousand points and
	// up outgrow the L2 cache.
	rec       []bucket // len buckets+1
	rest      []uint32 // cap len+pad, see pack
	n         uint32   // the number of points
	points    []uint32 // every entry in order, only while New or With builds
	shift     uint     // 32 - bits: position >> shift is the bucket
	offMask   uint32   // position & offMask is the offset within the bucket
	ownerBits uint
	ownerMask uint32
}

// HashTag returns the part of key that is hashed: the text between the first
// '{' and the first '}' after it, if that text is non-empty; otherwise the
// whole key. This is the Redis Cluster rule, so keys sharing a tag, such as
// "{user1}.a" and "{user1}.b", always have the same owner. It is a pure
// function and does not allocate.
func HashTag(key string) string {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}

// Position returns key's position on the circle: the top 32 bits of the hash
// of HashTag(key). It depends only on the Config's Hash, not on the nodes; a
// nil or zero Ring uses the default hash. It does not allocate.
func (r *Ring) Position(key string) uint32 {
	t := HashTag(key)
	if r == nil || r.hash == nil {
		return uint32(xxhash.Sum64String(t) >> 32)
	}
	return uint32(r.hash(t) >> 32)
}

// Nodes returns a copy of the ring's nodes sorted by Name in byte order, with
// a zero Weight reported as 1. A node's index, as used by LookupIndex and
// friends, is its position in this slice. A nil or zero Ring has none.
func (r *Ring) Nodes() []Node {
	if r == nil {
		return nil
	}
	return append([]Node(nil), r.nodes...)
}

// Len returns the number of nodes; 0 for a nil or zero Ring.
func (r *Ring) Len() int {
	if r == nil {
		return 0
	}
	return len(r.nodes)
}

// Index returns the index in Nodes() of the node called name and true, or
// -1 and false if there is none.
func (r *Ring) Index(name string) (int, bool) {
	if r == nil {
		return -1, false
	}
	i, ok := slices.BinarySearchFunc(r.nodes, name, func(n Node, name string) int {
		return strings.Compare(n.Name, name)
	})
	if !ok {
		return -1, false
	}
	return i, true
}

// VnodesPerWeight returns the number of points per unit of weight in effect:
// the recipe's default when the Config left it 0; 0 for a nil or zero Ring.
func (r *Ring) VnodesPerWeight() int {
	if r == nil {
		return 0
	}
	return r.vpw
}

// Recipe returns the placement recipe in effect, Recipe1 or Recipe2; 0 for
// a nil or zero Ring.
func (r *Ring) Recipe() int {
	if r == nil {
		return 0
	}
	return r.recipe
}

// name returns the name of node i, or "" for -1.
func (r *Ring) name(i int) string {
	if i < 0 {
		return ""
	}
	return r.nodes[i].Name
}
