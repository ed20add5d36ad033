package main

import (
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/ring"
)

// parseShardSpec parses name=host:port[:weight]. An IPv6 host is written
// in brackets: name=[::1]:6379:2.
func parseShardSpec(spec string) (redshard.Shard, error) {
	name, rest, ok := strings.Cut(spec, "=")
	if !ok || name == "" || rest == "" {
		return redshard.Shard{}, fmt.Errorf("%q: want name=host:port[:weight]", spec)
	}
	addr, weight := rest, ""
	// host:port has one colon outside brackets; a second one starts the weight.
	if i := strings.LastIndexByte(rest, ':'); i >= 0 && strings.Count(rest[strings.LastIndexByte(rest, ']')+1:], ":") >= 2 {
		addr, weight = rest[:i], rest[i+1:]
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return redshard.Shard{}, fmt.Errorf("%q: address %q: want host:port", spec, addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return redshard.Shard{}, fmt.Errorf("%q: bad port %q", spec, port)
	}
	s := redshard.Shard{Name: name, Addr: addr, Weight: 1}
	if weight != "" {
		if s.Weight, err = parseWeight(weight); err != nil {
			return redshard.Shard{}, fmt.Errorf("%q: %w", spec, err)
		}
	}
	return s, nil
}

// parseWeight parses a positive, finite weight.
func parseWeight(v string) (float64, error) {
	w, err := strconv.ParseFloat(v, 64)
	if err != nil || w <= 0 || math.IsInf(w, 0) || math.IsNaN(w) {
		return 0, fmt.Errorf("weight %q: want a positive number", v)
	}
	return w, nil
}

// shardSpecs is the repeatable --shard flag.
type shardSpecs []redshard.Shard

func (s *shardSpecs) String() string {
	if s == nil {
		return ""
	}
	parts := make([]string, len(*s))
	for i, sh := range *s {
		parts[i] = fmt.Sprintf("%s=%s:%g", sh.Name, sh.Addr, sh.Weight)
	}
	return strings.Join(parts, ",")
}

func (s *shardSpecs) Set(v string) error {
	sh, err := parseShardSpec(v)
	if err != nil {
		return err
	}
	*s = append(*s, sh)
	return nil
}

// source is where a subcommand gets its shard list: --config or --shard.
// A subcommand that contacts no server (plan, shares) sets offline: its
// configuration files are then read without their secrets, so the
// variables password_env and sentinel_password_env name need not be set.
type source struct {
	config  string
	shards  shardSpecs
	offline bool
}

// load reads a configuration file, without its secrets when s is offline.
func (s *source) load(path string) (*redshard.Options, error) {
	if s.offline {
		return redshard.LoadConfigWithoutSecrets(path)
	}
	return redshard.LoadConfig(path)
}

func (s *source) register(f *flags, what string) {
	f.StringVar(&s.config, "config", "", "JSON configuration `file` with the "+what+" (format: docs/operations.md)")
	one := "a shard"
	if what != "shards" {
		one = "one of the " + what
	}
	f.Var(&s.shards, "shard", one+", as `name=host:port[:weight]` (repeat the flag; instead of --config)")
}

// given reports whether --config or --shard was given.
func (s *source) given() bool { return s.config != "" || len(s.shards) > 0 }

// options returns the Options described by --config, or the shards of the
// --shard flags. Exactly one of them must be given.
func (s *source) options() (*redshard.Options, error) {
	switch {
	case s.config != "" && len(s.shards) > 0:
		return nil, usagef("give --config or --shard, not both")
	case s.config != "":
		return s.load(s.config)
	case len(s.shards) > 0:
		opt := &redshard.Options{Shards: slices.Clone(s.shards)}
		if err := opt.Validate(); err != nil {
			return nil, usageError{fmt.Errorf("--shard: %w", err)}
		}
		return opt, nil
	}
	return nil, usagef("no shards: give --config FILE or --shard name=host:port[:weight] (repeated)")
}

// change is one --add, --remove or --weight.
type change struct {
	op    string // "add", "remove" or "weight"
	shard redshard.Shard
}

// changeFlag is one of the --add, --remove and --weight flags; all three
// append to the same list, so changes apply in command-line order.
type changeFlag struct {
	op   string
	list *[]change
}

func (c changeFlag) String() string { return "" }

func (c changeFlag) Set(v string) error {
	var ch change
	switch c.op {
	case "add":
		s, err := parseShardSpec(v)
		if err != nil {
			return err
		}
		ch = change{"add", s}
	case "remove":
		if v == "" || strings.ContainsAny(v, "=:") {
			return fmt.Errorf("%q: want a shard name", v)
		}
		ch = change{"remove", redshard.Shard{Name: v}}
	case "weight":
		name, w, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return fmt.Errorf("%q: want name=weight", v)
		}
		weight, err := parseWeight(w)
		if err != nil {
			return fmt.Errorf("%q: %w", v, err)
		}
		ch = change{"weight", redshard.Shard{Name: name, Weight: weight}}
	}
	*c.list = append(*c.list, ch)
	return nil
}

// registerChanges adds --add, --remove and --weight to f.
func registerChanges(f *flags, list *[]change) {
	f.Var(changeFlag{"add", list}, "add", "add a shard, as `name=host:port[:weight]` (repeatable)")
	f.Var(changeFlag{"remove", list}, "remove", "remove the shard called `name` (repeatable)")
	f.Var(changeFlag{"weight", list}, "weight", "give a shard a new weight, as `name=weight` (repeatable)")
}

// applyChanges returns old with the changes applied in order. Naming a
// shard that is not there (or adding one that is) is a usage error.
func applyChanges(old []redshard.Shard, changes []change) ([]redshard.Shard, error) {
	out := slices.Clone(old)
	find := func(name string) int {
		return slices.IndexFunc(out, func(s redshard.Shard) bool { return s.Name == name })
	}
	for _, ch := range changes {
		i := find(ch.shard.Name)
		switch ch.op {
		case "add":
			if i >= 0 {
				return nil, usagef("--add %s: there is already a shard called %q", ch.shard.Name, ch.shard.Name)
			}
			if j := slices.IndexFunc(out, func(s redshard.Shard) bool { return s.Addr == ch.shard.Addr }); j >= 0 {
				return nil, usagef("--add %s: address %s is shard %q's", ch.shard.Name, ch.shard.Addr, out[j].Name)
			}
			out = append(out, ch.shard)
		case "remove":
			if i < 0 {
				return nil, usagef("--remove %s: no such shard (shards: %s)", ch.shard.Name, names(out))
			}
			out = slices.Delete(out, i, i+1)
		case "weight":
			if i < 0 {
				return nil, usagef("--weight %s: no such shard (shards: %s)", ch.shard.Name, names(out))
			}
			out[i].Weight = ch.shard.Weight
		}
	}
	if len(out) == 0 {
		return nil, usageError{fmt.Errorf("%w: the change removes every shard", redshard.ErrNoShards)}
	}
	return out, nil
}

func names(shards []redshard.Shard) string {
	n := make([]string, len(shards))
	for i, s := range shards {
		n[i] = s.Name
	}
	slices.Sort(n)
	return strings.Join(n, ", ")
}

// newRing builds the ring a client with these shards and placement uses.
func newRing(shards []redshard.Shard, p placement) (*ring.Ring, error) {
	nodes := make([]ring.Node, len(shards))
	for i, s := range shards {
		nodes[i] = ring.Node{Name: s.Name, Weight: s.Weight}
	}
	r, err := ring.New(nodes, p.config())
	if errors.Is(err, ring.ErrTooManyPoints) {
		return nil, fmt.Errorf("%w (lower the vnodes per weight or the weights)", err)
	}
	return r, err
}

// weightOf is a shard's effective weight (0 means 1).
func weightOf(s redshard.Shard) float64 {
	if s.Weight == 0 {
		return 1
	}
	return s.Weight
}

// vnodesFlag registers --vnodes on f. The function it returns, called after
// parsing, sets opt.VnodesPerWeight when the flag was given.
func vnodesFlag(f *flags) func(opt *redshard.Options) error {
	v := f.Int("vnodes", 0, "ring points per unit of weight (default: the config's vnodes_per_weight, else the ring package's default)")
	return func(opt *redshard.Options) error {
		if !f.isSet("vnodes") {
			return nil
		}
		if *v < 0 {
			return usagef("--vnodes %d: must not be negative", *v)
		}
		opt.VnodesPerWeight = *v
		return nil
	}
}
