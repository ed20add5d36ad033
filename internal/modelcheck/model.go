package modelcheck

import (
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/anishathalye/porcupine"
)

// Kind is one single-key command of the model.
type Kind uint8

const (
	Set        Kind = iota // SET k v -> OK
	Get                    // GET k -> v | nil
	Del                    // DEL k -> 0 | 1
	Incr                   // INCR k -> n
	Append                 // APPEND k s -> length
	GetDel                 // GETDEL k -> v | nil
	ExpirePast             // EXPIRE k -1 or PEXPIREAT k 1 -> 0 | 1 (deletes at once)
)

func (k Kind) String() string {
	return [...]string{"SET", "GET", "DEL", "INCR", "APPEND", "GETDEL", "EXPIRE-PAST"}[k]
}

// writes reports whether the command may change the key.
func (k Kind) writes() bool { return k != Get }

// Input is one command on one key, as porcupine sees it. A multi-key
// command (MSET, MGET, a pipeline, a transaction) is recorded as one Input
// per key with the caller's call and return times: redshard does not make
// MSET/MGET atomic across shards, so only each key is checked.
type Input struct {
	Kind Kind
	Key  string
	Arg  string // SET's value, APPEND's suffix
	Via  string // the command that carried it: "MSET", "pipeline", "tx", "final read", ...
	Op   int    // the plan's operation number (-1: the final reads)
}

// Output is what the caller got.
type Output struct {
	Unknown bool   // an error other than redis.Nil: it may or may not have taken effect
	Nil     bool   // redis.Nil
	Val     string // GET, GETDEL
	N       int64  // DEL, INCR, APPEND, EXPIRE-PAST
	Err     string // the error, when Unknown
}

// state is a key's value; "" is absent (the plan never writes "").
type state = string

// step is the sequential specification of one key. An Unknown output
// always applies: porcupine gets it with an open-ended return time, so "it
// never happened" is the linearization that puts it after everything else.
func step(s state, in Input, out Output) (bool, state) {
	switch in.Kind {
	case Set:
		return true, in.Arg
	case Get:
		if out.Unknown {
			return true, s
		}
		return matches(s, out), s
	case Del, ExpirePast:
		if out.Unknown {
			return true, ""
		}
		return out.N == b2i(s != ""), ""
	case GetDel:
		if out.Unknown {
			return true, ""
		}
		return matches(s, out), ""
	case Incr:
		n := int64(0)
		if s != "" {
			var err error
			if n, err = strconv.ParseInt(s, 10, 64); err != nil {
				// The plan keeps every value an integer; a non-integer
				// value is a value nobody wrote.
				return false, s
			}
		}
		next := strconv.FormatInt(n+1, 10)
		if out.Unknown {
			return true, next
		}
		return out.N == n+1, next
	case Append:
		next := s + in.Arg
		if out.Unknown {
			return true, next
		}
		return out.N == int64(len(next)), next
	}
	return false, s
}

func matches(s state, out Output) bool {
	if out.Nil {
		return s == ""
	}
	return s != "" && out.Val == s
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// model is the register model of one key, partitioned by key.
var model = porcupine.Model{
	Partition: PartitionBy(func(in any) string { return in.(Input).Key }),
	Init:      func() any { return "" },
	Step: func(s, in, out any) (bool, any) {
		return step(s.(state), in.(Input), out.(Output))
	},
	Hash: func(s any) uint64 {
		h := fnv.New64a()
		h.Write([]byte(s.(state)))
		return h.Sum64()
	},
	DescribeOperation: func(in, out any) string { return describe(in.(Input), out.(Output)) },
	DescribeState: func(s any) string {
		if s.(state) == "" {
			return "(absent)"
		}
		return strconv.Quote(s.(state))
	},
}

// describe renders one command and its outcome: `SET k03 "1207" -> OK`.
func describe(in Input, out Output) string {
	cmd := in.Kind.String() + " " + in.Key
	if in.Kind == Set || in.Kind == Append {
		cmd += " " + strconv.Quote(in.Arg)
	}
	if in.Via != "" {
		cmd += " (" + in.Via + ")"
	}
	var res string
	switch {
	case out.Unknown:
		res = "? (" + out.Err + ")"
	case out.Nil:
		res = "nil"
	case in.Kind == Set:
		res = "OK"
	case in.Kind == Get || in.Kind == GetDel:
		res = strconv.Quote(out.Val)
	default:
		res = fmt.Sprint(out.N)
	}
	return cmd + " -> " + res
}

// Model is the per-key register model, for histories recorded elsewhere
// (the fleet test's ledgers of OS processes): Input and Output as here,
// partitioned by key.
var Model = model

// PartitionBy returns a porcupine Partition that splits a history into one
// part per key(op.Input), in the order each key first appears: each key's
// operations are checked as an independent register.
func PartitionBy(key func(input any) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range h {
			k := key(op.Input)
			if _, ok := byKey[k]; !ok {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, k := range order {
			out = append(out, byKey[k])
		}
		return out
	}
}
