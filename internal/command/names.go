package command

import (
	"maps"
	"slices"
)

// names finds a top-level row by its lower-case name: an open-addressed
// hash table on a cheap hash of the name's length and three of its bytes,
// probed linearly. Every command goes through it; on the names go-redis
// sends it costs about a third of a lookup in the Go map it mirrors
// (hashing and probing a 424-entry map dominated Lookup's cost). It is
// built once, read-only afterwards, and safe for concurrent use.
var names = newNameIndex(table)

// nameSlots is the size of nameIndex: a power of two, at least twice the
// number of rows so that probe sequences stay short.
const nameSlots = 1024

type nameIndex struct {
	slots  [nameSlots]nameSlot
	maxLen int // of the longest name
}

type nameSlot struct {
	name string
	e    *entry
}

// nameHash mixes the length and the first, middle and last bytes of a
// non-empty name. Command names differ in these often enough: the table's
// names take 1.37 probes on average, as with a random hash at this load
// (a test bounds the mean and the longest sequence).
func nameHash(s string) uint32 {
	n := len(s)
	h := uint32(n)
	h = h*131 + uint32(s[0])
	h = h*131 + uint32(s[n/2])
	h = h*131 + uint32(s[n-1])
	return (h * 0x9e3779b1) >> (32 - 10) // top 10 bits: log2(nameSlots)
}

func newNameIndex(m map[string]*entry) *nameIndex {
	if 2*len(m) > nameSlots {
		panic("command: nameSlots too small for the table")
	}
	for name := range m {
		if name == "" || len(name) > maxName {
			panic("command: bad name length: " + name)
		}
	}
	x := &nameIndex{}
	for _, name := range slices.Sorted(maps.Keys(m)) { // the same layout every run
		e := m[name]
		i := nameHash(name)
		for x.slots[i].e != nil {
			i = (i + 1) % nameSlots
		}
		x.slots[i] = nameSlot{name, e}
		x.maxLen = max(x.maxLen, len(name))
	}
	return x
}

// findName returns the top-level row named by a (args[0]), matched
// case-insensitively, or nil. It is find(table, a), faster on strings.
func findName(a interface{}) *entry {
	v, ok := a.(string)
	if !ok {
		return find(table, a)
	}
	if e := names.get(v); e != nil || len(v) > names.maxLen || !hasUpper(v) {
		return e
	}
	var buf [maxName]byte // maxLen <= maxName (newNameIndex)
	n := copy(buf[:], v)
	lower(buf[:n])
	return names.get(string(buf[:n]))
}

// get returns the row named s (exactly: no case folding), or nil.
func (x *nameIndex) get(s string) *entry {
	if s == "" {
		return nil
	}
	for i := nameHash(s); ; i = (i + 1) % nameSlots {
		sl := &x.slots[i]
		if sl.e == nil {
			return nil
		}
		if sl.name == s {
			return sl.e
		}
	}
}

// probes returns the number of slots get reads to find s (to test the
// hash's spread).
func (x *nameIndex) probes(s string) int {
	n := 1
	for i := nameHash(s); x.slots[i].e != nil && x.slots[i].name != s; i = (i + 1) % nameSlots {
		n++
	}
	return n
}
