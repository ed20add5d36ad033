package command

import (
	"errors"
	"fmt"
	"strings"
)

// keyKind says how a keySpec finds keys.
type keyKind uint8

const (
	noKeys    keyKind = iota
	rangeKeys         // keys at first, first+step, ... up to last
	numKeys           // optional fixed key, then numkeys, then that many keys (or key groups)
	funcKeys          // a command-specific parser (XREAD, SORT, MIGRATE, ...)
)

// keySpec locates the key arguments of one command.
type keySpec struct {
	kind keyKind
	// rangeKeys: index of the first key. numKeys: index of a fixed key that
	// comes before numkeys (ZUNIONSTORE's destination), or 0 if none.
	first int
	// rangeKeys: index of the last key; negative counts from the end of the
	// arguments (-1: the last argument, -2: the one before it).
	last int
	// rangeKeys, numKeys: distance between two keys (2 for key-value pairs).
	step int
	// numKeys: index of the numkeys argument; the keys follow it.
	num int
	// funcKeys: which command-specific parser.
	parser parser
}

// parser names a command-specific key parser. It is an enum, not a func
// value, because an indirect call would make every caller's keys buffer
// escape to the heap.
type parser uint8

const (
	parseStream parser = iota + 1
	parseGeoStore
	parseMigrate
	parseSort
	parseSortRO
)

// key: one key at index i.
func key(i int) keySpec { return keySpec{kind: rangeKeys, first: i, last: i, step: 1} }

// keys: every argument from first to last (negative: from the end).
func keys(first, last int) keySpec {
	return keySpec{kind: rangeKeys, first: first, last: last, step: 1}
}

// every: from first to the end, a key every step arguments (MSET pairs).
func every(first, step int) keySpec {
	return keySpec{kind: rangeKeys, first: first, last: -1, step: step}
}

// numkeys: the argument at index num is the number of keys, which follow it.
func numkeys(num int) keySpec { return keySpec{kind: numKeys, num: num, step: 1} }

// destNumkeys: a destination key at 1, then numkeys at num and the keys.
func destNumkeys(num int) keySpec { return keySpec{kind: numKeys, first: 1, num: num, step: 1} }

// numkeyGroups: numkeys at num counts groups of step arguments, each
// starting with a key (MSETEX key value pairs).
func numkeyGroups(num, step int) keySpec { return keySpec{kind: numKeys, num: num, step: step} }

// custom: keys found by a command-specific parser.
func custom(p parser) keySpec { return keySpec{kind: funcKeys, parser: p} }

var (
	errArity      = errors.New("wrong number of arguments")
	errNumkeys    = errors.New("numkeys is not a non-negative integer")
	errNumkeysBig = errors.New("numkeys is greater than the number of arguments")
)

// locate appends the key indexes of args to keys.
func (s *keySpec) locate(args []interface{}, keys []int) ([]int, error) {
	switch s.kind {
	case rangeKeys:
		if s.first == s.last { // one key (GET, SET, ...): the common case, in short
			if s.first >= len(args) {
				return keys, errArity
			}
			return append(keys, s.first), nil
		}
		last := s.last
		if last < 0 {
			last += len(args)
			// Trailing arguments after the last key group must be complete.
			if last < s.first || (last-s.first+1)%s.step != 0 {
				return keys, errArity
			}
		} else if last >= len(args) {
			return keys, errArity
		}
		for i := s.first; i <= last; i += s.step {
			keys = append(keys, i)
		}
		return keys, nil
	case numKeys:
		if s.num >= len(args) {
			return keys, errArity
		}
		n, ok := argInt(args[s.num])
		if !ok || n < 0 {
			return keys, errNumkeys
		}
		if n > int64(len(args)) || s.num+int(n)*s.step >= len(args) {
			return keys, errNumkeysBig
		}
		if s.first > 0 {
			keys = append(keys, s.first)
		}
		for i := 0; i < int(n); i++ {
			keys = append(keys, s.num+1+i*s.step)
		}
		return keys, nil
	case funcKeys:
		switch s.parser {
		case parseStream:
			return streamKeys(args, keys)
		case parseGeoStore:
			return geoStoreKeys(args, keys)
		case parseMigrate:
			return migrateKeys(args, keys)
		case parseSort:
			return sortKeys(args, keys)
		case parseSortRO:
			return sortROKeys(args, keys)
		}
	}
	return keys, nil
}

// streamKeys finds the keys of XREAD and XREADGROUP: the first half of the
// arguments after STREAMS (the second half are their IDs). Options before
// STREAMS are skipped with their values, as Redis does, so a group,
// consumer or option value named "streams" is not mistaken for the keyword.
func streamKeys(args []interface{}, keys []int) ([]int, error) {
	i := 1
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case isWord(a, "streams"):
			rest := len(args) - i - 1
			if rest == 0 || rest%2 != 0 {
				return keys, errors.New("STREAMS needs one ID for each stream")
			}
			for k := i + 1; k <= i+rest/2; k++ {
				keys = append(keys, k)
			}
			return keys, nil
		case isWord(a, "count"), isWord(a, "block"), isWord(a, "maxcount"),
			isWord(a, "maxsize"), isWord(a, "claim"):
			i++
		case isWord(a, "group"):
			i += 2
		case isWord(a, "noack"):
		default:
			// Refuse rather than guess: a new option whose value we do not
			// skip could be read as the STREAMS keyword.
			return keys, fmt.Errorf("unexpected argument %q before STREAMS", Arg(a))
		}
	}
	return keys, errors.New("missing STREAMS")
}

// sortKeys finds the keys of SORT: the sorted key and the destination of
// the last STORE option, like COMMAND GETKEYS, plus every BY/GET pattern that
// reads other keys (see patternKey).
func sortKeys(args []interface{}, keys []int) ([]int, error) {
	return sortLike(args, keys, true)
}

// sortROKeys finds the keys of SORT_RO, which has no STORE option.
func sortROKeys(args []interface{}, keys []int) ([]int, error) {
	return sortLike(args, keys, false)
}

func sortLike(args []interface{}, keys []int, store bool) ([]int, error) {
	if len(args) < 2 {
		return keys, errArity
	}
	n := len(keys)
	keys = append(keys, 1)
	dest := -1
	var other error // errOtherKeys once a pattern reads keys of any shard
	for i := 2; i < len(args); i++ {
		a := args[i]
		switch {
		case isWord(a, "limit"):
			i += 2
		case isWord(a, "by"), isWord(a, "get"):
			i++
			if i >= len(args) {
				return keys[:n], fmt.Errorf("%s needs a pattern", strings.ToUpper(Arg(a)))
			}
			reads, err := patternKey(args[i])
			if err == errOtherKeys {
				other = err
			} else if err != nil {
				return keys[:n], err
			}
			if reads {
				keys = append(keys, i)
			}
		case store && isWord(a, "store"):
			i++
			if i >= len(args) {
				return keys[:n], errors.New("STORE needs a destination key")
			}
			dest = i // the last STORE wins, as in Redis
		}
	}
	if dest >= 0 {
		keys = insertSorted(keys, n, dest)
	}
	return keys, other
}

// errOtherKeys is patternKey's answer for a pattern that reads keys which
// may live on any shard; Lookup turns it into the OtherKeys flag.
var errOtherKeys = errors.New("pattern reads keys that may live on any shard")

// patternKey checks a SORT BY/GET pattern. A pattern without '*' (such as
// "nosort" or "#") reads no other key. One with '*' reads keys formed from
// it, on the server that runs the SORT; that is correct only if those keys
// live on the same shard, which holds when the pattern has a non-empty
// {hash tag} before its first '*': every key it forms then hashes like the
// tag, and so does the pattern itself when the client checks it as a key.
// Any other pattern with '*' gives errOtherKeys.
func patternKey(a interface{}) (reads bool, err error) {
	p := Arg(a)
	star := strings.IndexByte(p, '*')
	if star < 0 {
		return false, nil
	}
	if open := strings.IndexByte(p[:star], '{'); open >= 0 {
		if end := strings.IndexByte(p[open+1:star], '}'); end > 0 {
			return true, nil
		}
	}
	return false, errOtherKeys
}

// insertSorted inserts v into keys[from:], which is sorted, keeping it
// sorted.
func insertSorted(keys []int, from, v int) []int {
	keys = append(keys, v)
	for j := len(keys) - 1; j > from && keys[j-1] > v; j-- {
		keys[j], keys[j-1] = keys[j-1], keys[j]
	}
	return keys
}

// geoStoreKeys finds the keys of GEORADIUS and GEORADIUSBYMEMBER: the key and
// the destinations of STORE and STOREDIST options. Redis stores into the
// last one, and COMMAND GETKEYS reports the first of each kind; every one is
// reported here so all must live on the key's shard. Like Redis, options are
// searched from index 5.
func geoStoreKeys(args []interface{}, keys []int) ([]int, error) {
	if len(args) < 2 {
		return keys, errArity
	}
	n := len(keys)
	keys = append(keys, 1)
	for i := 5; i < len(args); i++ {
		if isWord(args[i], "store") || isWord(args[i], "storedist") {
			if i+1 >= len(args) {
				return keys[:n], fmt.Errorf("%s needs a destination key", strings.ToUpper(Arg(args[i])))
			}
			i++
			keys = append(keys, i)
		}
	}
	return keys, nil
}

// migrateKeys finds the keys of MIGRATE host port key|"" db timeout [COPY]
// [REPLACE] [AUTH pw | AUTH2 user pw] [KEYS key ...].
func migrateKeys(args []interface{}, keys []int) ([]int, error) {
	if len(args) < 6 {
		return keys, errArity
	}
	for i := 6; i < len(args); i++ {
		a := args[i]
		switch {
		case isWord(a, "keys"):
			if !argEmpty(args[3]) {
				return keys, errors.New("KEYS needs an empty key argument")
			}
			if i+1 >= len(args) {
				return keys, errors.New("KEYS needs at least one key")
			}
			for k := i + 1; k < len(args); k++ {
				keys = append(keys, k)
			}
			return keys, nil
		case isWord(a, "auth"):
			i++
		case isWord(a, "auth2"):
			i += 2
		}
	}
	if argEmpty(args[3]) {
		return keys, errors.New("empty key and no KEYS option")
	}
	return append(keys, 3), nil
}
