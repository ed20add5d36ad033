// Package ring decides which shard owns a key: a weighted consistent-hash
// ring with virtual nodes. Each node gets points on a circle in proportion
// to its weight; a key belongs to the first point at or after the key's own
// position (Recipe1) or to the nearest point (Recipe2). Adding or removing
// a node only moves the keys on the arcs its points take or free, so about
// its weight's share of the keys moves and no key moves between two other
// nodes. The placement is a published function,
// written out below, so that every client of a fleet, in any language,
// computes the same owner for every key. A Ring is immutable and safe for
// concurrent use; build a new one (New, or Ring.With) when membership
// changes, and use Diff to see which arcs of the circle change owner.
//
// # Placement recipes
//
// There are two, versioned: Recipe1, the original, which the zero
// Config.Recipe means, so that every ring configured before Recipe2
// existed keeps its placement, and Recipe2, which takes the same points
// but gives each key to its nearest point, and so balances as well with
// an eighth of the points (see "Recipe2" below). A Config that names a
// VnodesPerWeight keeps its meaning under both: points per unit of weight.
// Recipe1 is written out first; Recipe2 changes only step 8 to 10.
//
// This is the contract. Hash is 64-bit xxHash (XXH64, seed 0) of the UTF-8
// bytes of a string unless Config.Hash replaces it; V is
// Config.VnodesPerWeight, or when it is 0 DefaultVnodesPerWeight (8192)
// under Recipe1 and DefaultVnodesPerWeight2 (1024) under Recipe2.
//
//  1. The circle is the unsigned 32-bit integers, [0, 2^32).
//  2. Hash tag: if the key contains '{', at byte index s for the first one,
//     and a '}' occurs after it, at byte index e for the first one after s,
//     and e > s+1, the hashed text is key[s+1:e]; otherwise it is the whole
//     key. ("{user1}.a" hashes "user1"; "{}x", "x{}" and "{" hash themselves;
//     "{a}{b}" hashes "a".)
//  3. A key's position is the top 32 bits of Hash(hashed text):
//     uint32(Hash(t) >> 32).
//  4. Nodes have distinct, non-empty names and are sorted by name in byte
//     order. A weight must be finite and >= 0; weight 0 means 1.
//  5. A node of weight w gets p = max(1, round(w × V)) points, where w × V is
//     an IEEE-754 double product and round takes halves away from zero
//     (Go's math.Round).
//  6. Point i of node n, for i = 0 .. p-1, sits at
//     uint32(Hash(n.Name + "#" + decimal(i)) >> 32), decimal(i) being i in
//     base-10 ASCII without leading zeros ("shard-3#0", "shard-3#10").
//  7. All points are ordered by (position, node name in byte order, point
//     index i). Equal positions are common in big rings (8 million points
//     share a position about 8,000 times); this order decides them.
//  8. The owner of a key at position k is the node of the first point in
//     that order whose position is >= k; if there is none, the first point
//     (the circle wraps).
//  9. Replicas of a key: walk the points in that order from the owner's
//     point, wrapping, and collect each node the first time it is met; the
//     owner comes first.
//  10. Shares: the point at position pos_j owns the arc (pos_{j-1}, pos_j];
//     the first point owns (pos_last, 2^32) ∪ [0, pos_0]. A point whose
//     position equals its predecessor's owns nothing. A node's share is the
//     sum of its arcs, counted in integers, divided by 2^32.
//
// # Test vectors
//
// Nodes alpha (weight 1), bravo (1), charlie (2) and delta (0.5), default
// hash. Some hashes: XXH64("alpha#0") = 0x75c176dcdcb017b0, so alpha's
// point 0 sits at 0x75c176dc; XXH64("charlie#31") = 0xca49d949caf5a58a;
// XXH64("user1") = 0x63edb0950fc8c927.
//
// With V = 16 (alpha and bravo 16 points, charlie 32, delta 8):
//
//	key            position    owner    Replicas(key, 3)
//	""             0xef46db37  delta    delta charlie alpha
//	"a"            0xd24ec4f1  alpha    alpha charlie bravo
//	"foo"          0x33bf00a8  alpha    alpha bravo delta
//	"bar"          0x48a37c90  charlie  charlie alpha bravo
//	"key:0"        0x5913602a  delta    delta charlie alpha
//	"key:1"        0xbd499548  alpha    alpha bravo charlie
//	"key:42"       0x37322fc6  alpha    alpha bravo delta
//	"user:1000"    0x4836ae42  charlie  charlie alpha bravo
//	"{user1}.a"    0x63edb095  charlie  charlie alpha bravo
//	"{user1}.b"    0x63edb095  charlie  charlie alpha bravo
//	"user1"        0x63edb095  charlie  charlie alpha bravo
//	"{}"           0x2e1472b5  alpha    alpha bravo delta
//	"{}x"          0xdeda4be6  bravo    bravo alpha charlie
//	"x{}"          0xb839c1c4  charlie  charlie bravo alpha
//	"{a}{b}"       0xd24ec4f1  alpha    alpha charlie bravo
//	"{b}"          0x78452aa1  bravo    bravo charlie delta
//	"foo{bar}baz"  0x48a37c90  charlie  charlie alpha bravo
//	"{"            0xea9ca750  delta    delta charlie alpha
//	"}"            0xf38e01c0  charlie  charlie alpha bravo
//	"}{a}"         0xd24ec4f1  alpha    alpha charlie bravo
//	"{x"           0x0cd7d4f5  delta    delta charlie alpha
//	"x}"           0x9a4610c8  delta    delta alpha charlie
//	"hello world"  0x45ab6734  charlie  charlie alpha bravo
//	"日本語"       0x7179a19f  bravo    bravo alpha charlie
//
// Shares, in positions of 2^32: alpha 964595681, bravo 722149089, charlie
// 2001215787, delta 607006739.
//
// With the default V = 8192 (alpha and bravo 8192 points, charlie 16384,
// delta 4096):
//
//	key            position    owner    Replicas(key, 3)
//	""             0xef46db37  charlie  charlie bravo alpha
//	"a"            0xd24ec4f1  bravo    bravo alpha charlie
//	"foo"          0x33bf00a8  alpha    alpha bravo charlie
//	"bar"          0x48a37c90  alpha    alpha bravo charlie
//	"key:0"        0x5913602a  bravo    bravo alpha charlie
//	"key:1"        0xbd499548  charlie  charlie alpha bravo
//	"key:42"       0x37322fc6  charlie  charlie alpha bravo
//	"user:1000"    0x4836ae42  charlie  charlie bravo alpha
//	"{user1}.a"    0x63edb095  charlie  charlie alpha bravo
//	"{user1}.b"    0x63edb095  charlie  charlie alpha bravo
//	"user1"        0x63edb095  charlie  charlie alpha bravo
//	"{}"           0x2e1472b5  charlie  charlie alpha bravo
//	"{}x"          0xdeda4be6  charlie  charlie bravo delta
//	"x{}"          0xb839c1c4  alpha    alpha delta bravo
//	"{a}{b}"       0xd24ec4f1  bravo    bravo alpha charlie
//	"{b}"          0x78452aa1  alpha    alpha delta bravo
//	"foo{bar}baz"  0x48a37c90  alpha    alpha bravo charlie
//	"{"            0xea9ca750  charlie  charlie bravo alpha
//	"}"            0xf38e01c0  alpha    alpha bravo charlie
//	"}{a}"         0xd24ec4f1  bravo    bravo alpha charlie
//	"{x"           0x0cd7d4f5  charlie  charlie bravo alpha
//	"x}"           0x9a4610c8  charlie  charlie alpha delta
//	"hello world"  0x45ab6734  charlie  charlie bravo alpha
//	"日本語"       0x7179a19f  alpha    alpha charlie delta
//
// Shares, in positions of 2^32: alpha 949807204, bravo 961927581, charlie
// 1916644140, delta 466588371.
//
// # Recipe2
//
// Steps 1 to 7 are Recipe1's. Then:
//
//  8. Number the points 0 .. L-1 in the order of step 7, with positions
//     p_0 .. p_(L-1). The gap of point j is the distance to the next one
//     clockwise: g_j = p_(j+1) - p_j for j < L-1, and
//     g_(L-1) = 2^32 + p_0 - p_(L-1) (2^32 when L = 1). Point j's boundary
//     is b_j = ((p_j + floor(g_j / 2)) mod 2^32) | 0xff: halfway to the
//     next point, rounded up to the last position of its block of 256
//     (so that only the top 24 bits of a key's position decide its owner).
//  9. Point j owns the arc (b_(j-1), b_j], counted modulo 2^32, point 0's
//     starting at b_(L-1); a single point owns the whole circle. So a key
//     belongs to its nearest point, a key halfway between two points to the
//     one counterclockwise of it, up to the rounding to blocks of 256. Arcs
//     can be empty (points at equal positions, or closer than 256). The
//     owner of a key is the node of the point whose arc holds its position.
//     Equivalently: walk the boundaries in the points' order, starting with
//     the last point's when its boundary wrapped past 2^32 (it is then
//     below every other), and take the first boundary >= k, else the first.
//  10. Replicas: walk the points in the order of step 7 from the owner's
//     point, wrapping, as in Recipe1's step 9. Shares: a node's share is the
//     sum of its points' arcs, divided by 2^32.
//
// With the nodes above and V = 16, the last point in order is alpha#15 at
// 0xfe25e090, and the first charlie#13 at 0x09ba724c, so alpha#15's gap is
// 0x0b94919c and its boundary 0x03f029ff: it wrapped, so it comes first.
// alpha#0, at 0x75c176dc, is followed by bravo#11 at 0x78b2e63c; its
// boundary is 0x773a2eff.
//
//	key            position    owner    Replicas(key, 3)
//	""             0xef46db37  delta    delta charlie alpha
//	"a"            0xd24ec4f1  alpha    alpha charlie bravo
//	"foo"          0x33bf00a8  alpha    alpha bravo delta
//	"bar"          0x48a37c90  charlie  charlie alpha bravo
//	"key:0"        0x5913602a  bravo    bravo delta charlie
//	"key:1"        0xbd499548  bravo    bravo alpha charlie
//	"key:42"       0x37322fc6  alpha    alpha bravo delta
//	"user:1000"    0x4836ae42  charlie  charlie alpha bravo
//	"{user1}.a"    0x63edb095  charlie  charlie alpha bravo
//	"{user1}.b"    0x63edb095  charlie  charlie alpha bravo
//	"user1"        0x63edb095  charlie  charlie alpha bravo
//	"{}"           0x2e1472b5  charlie  charlie alpha bravo
//	"{}x"          0xdeda4be6  charlie  charlie bravo alpha
//	"x{}"          0xb839c1c4  charlie  charlie bravo alpha
//	"{a}{b}"       0xd24ec4f1  alpha    alpha charlie bravo
//	"{b}"          0x78452aa1  bravo    bravo charlie delta
//	"foo{bar}baz"  0x48a37c90  charlie  charlie alpha bravo
//	"{"            0xea9ca750  charlie  charlie delta alpha
//	"}"            0xf38e01c0  delta    delta charlie alpha
//	"}{a}"         0xd24ec4f1  alpha    alpha charlie bravo
//	"{x"           0x0cd7d4f5  charlie  charlie delta alpha
//	"x}"           0x9a4610c8  charlie  charlie delta alpha
//	"hello world"  0x45ab6734  charlie  charlie alpha bravo
//	"日本語"       0x7179a19f  bravo    bravo alpha charlie
//
// Shares, in positions of 2^32: alpha 940722432, bravo 963571200, charlie
// 2004186880, delta 386486784.
//
// With the default V = 1024 (alpha and bravo 1024 points, charlie 2048,
// delta 512):
//
//	key            position    owner    Replicas(key, 3)
//	""             0xef46db37  alpha    alpha bravo charlie
//	"a"            0xd24ec4f1  bravo    bravo delta alpha
//	"foo"          0x33bf00a8  bravo    bravo delta charlie
//	"bar"          0x48a37c90  charlie  charlie alpha bravo
//	"key:0"        0x5913602a  alpha    alpha bravo charlie
//	"key:1"        0xbd499548  charlie  charlie bravo delta
//	"key:42"       0x37322fc6  charlie  charlie alpha bravo
//	"user:1000"    0x4836ae42  charlie  charlie delta bravo
//	"{user1}.a"    0x63edb095  bravo    bravo delta charlie
//	"{user1}.b"    0x63edb095  bravo    bravo delta charlie
//	"user1"        0x63edb095  bravo    bravo delta charlie
//	"{}"           0x2e1472b5  charlie  charlie bravo alpha
//	"{}x"          0xdeda4be6  bravo    bravo delta alpha
//	"x{}"          0xb839c1c4  bravo    bravo charlie delta
//	"{a}{b}"       0xd24ec4f1  bravo    bravo delta alpha
//	"{b}"          0x78452aa1  delta    delta charlie alpha
//	"foo{bar}baz"  0x48a37c90  charlie  charlie alpha bravo
//	"{"            0xea9ca750  bravo    bravo alpha charlie
//	"}"            0xf38e01c0  bravo    bravo alpha charlie
//	"}{a}"         0xd24ec4f1  bravo    bravo delta alpha
//	"{x"           0x0cd7d4f5  charlie  charlie bravo delta
//	"x}"           0x9a4610c8  bravo    bravo alpha charlie
//	"hello world"  0x45ab6734  charlie  charlie bravo alpha
//	"日本語"       0x7179a19f  alpha    alpha charlie bravo
//
// Shares, in positions of 2^32: alpha 957819392, bravo 936169728, charlie
// 1916798720, delta 484179456.
//
// # The default VnodesPerWeight under Recipe2, 1024
//
// A point's arc under Recipe1 is one gap between random points, whose
// length varies by as much as its mean; under Recipe2 it is half of two
// gaps, which vary by 1/sqrt(2) of that, so a node's share varies by about
// 1/sqrt(2p) of itself instead of 1/sqrt(p). Hottest node's exact share
// over the mean under Recipe2, over 20 naming schemes like those above
// ("shard-%d", "10.0.0.%d:6379", "kv-%05d", "mem-%d:11211", ...), as
// median / 90th percentile / worst:
//
//	V        10 nodes               100 nodes              1000 nodes
//	768      1.042 / 1.074 / 1.079  1.064 / 1.076 / 1.078  1.087 / 1.094 / 1.104
//	1024     1.036 / 1.054 / 1.073  1.057 / 1.071 / 1.074  1.074 / 1.093 / 1.095
//	1536     1.029 / 1.046 / 1.055  1.048 / 1.056 / 1.058  1.062 / 1.074 / 1.076
//
// 1024 is Recipe1's 4096 at 10 nodes and better than it at 1000, with a
// quarter of its points, an eighth of Recipe1's default: 80 KB of heap for
// 10 equal nodes, 625 KB for 100 and 5.5 MB for 1000, and a ring of 100
// nodes nearly fits a core's L2 cache. Fleets that want a few percent
// less imbalance can name a larger VnodesPerWeight (2048: about 1.25 MB
// for 100 nodes, 11 MB for 1000).
//
// # The default VnodesPerWeight under Recipe1, 8192
//
// With p random points a node's share of the circle varies by about
// 1/sqrt(p) of itself, so the hottest of N equal nodes sits some standard
// deviations above the mean, more with more nodes. Hottest node's share
// over the mean, exact (from Shares), over 20 naming schemes ("shard-%d",
// "10.0.0.%d:6379", "cache-%03d.prod", ...), as median / 90th percentile /
// worst:
//
//	V        10 nodes              100 nodes             1000 nodes
//	4096     1.025 / 1.032 / 1.034  1.034 / 1.048 / 1.055  1.052 / 1.059 / 1.067
//	8192     1.018 / 1.022 / 1.026  1.028 / 1.033 / 1.037  1.039 / 1.043 / 1.044
//	16384    1.011 / 1.017 / 1.019  1.019 / 1.022 / 1.027  1.027 / 1.032 / 1.033
//
// 4096 misses a 3% imbalance target at 10 nodes for one naming scheme in
// five; 8192 meets it for all twenty with margin for the sampling noise of
// real keys (a million keys add 0.2 to 0.5% at 10 nodes). Memory and build
// time grow linearly with V: a ring keeps 5.4 to 8.4 bytes a point (a
// 16-byte record per bucket of two to four points that holds the bucket's
// first three points inline, and a packed uint32 for each point past the
// third of its bucket; the more points a bucket, the less a point costs),
// so 8192 points a node is about 44 KB a node, 44 MB for 1000 nodes (5.4
// bytes a point), 5 MB for 100 (6.1), and New hashes and sorts 8.2 million
// points for 1000 nodes (tens of milliseconds on two cores). The records
// trade memory for speed: a lookup usually reads one cache line, where a
// plain array of points (4.5 to 5 bytes a point with its index) costs a
// read of the index, then a dependent read of the points, each missing the
// cache once a ring outgrows it. Lookups cost the same at any V. Fleets
// that need less memory, or fewer than a few percent of imbalance, can
// choose another V; all their clients must use the same one.
//
// # Lookup
//
// The circle is cut into 2^b equal buckets (b chosen from the point count:
// two to four points a bucket), each with a 16-byte record of its first
// three points and where the others are. A lookup scans the tag, hashes
// it, reads the bucket's record and the next one's first point, usually in
// the same cache line, and compares three points without branches; only a
// key past the third point of a fuller bucket reads the others. There is
// no search, and no cost that grows with the number of points. Diff,
// Shares and Ring.With walk or merge the points in order and cost time
// linear in them.
package ring
