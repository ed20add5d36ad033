package redshard

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/hotkey"
	"github.com/redshard/redshard/internal/strictjson"
)

// LoadConfig reads the JSON configuration file at path and returns the
// Options it describes, validated as NewClient validates them. It is the
// one configuration format of the redshard command and of programs that
// want a file rather than code. Every error names the file and the field.
//
// The file holds one JSON object. Only "shards" is required; every other
// field may be left out and then takes the default of the Options field it
// sets. Durations are Go duration strings ("500ms", "10m"). Unknown fields
// are errors, and so is a field given twice in one object, so a misspelt
// or repeated setting is never silently ignored. A UTF-8 byte-order mark
// at the start of the file is skipped. A shard's "weight" left out is 1;
// an explicit 0 is refused (it does not drain a shard: remove the shard
// from the list instead, see docs/operations.md).
//
//	{
//	  "shards": [                                    // Options.Shards
//	    {"name": "cache-a", "addr": "10.0.0.1:6379", "weight": 1},
//	    {"name": "cache-b", "addr": "10.0.0.2:6379", "weight": 2},
//	    {"name": "cache-c", "sentinel": {"master": "mymaster",  // a Sentinel-managed primary
//	                       "addrs": ["10.0.0.5:26379", "10.0.0.6:26379"]}}
//	  ],
//	  "vnodes_per_weight": 0,                        // Options.VnodesPerWeight
//	  "ring_recipe": 0,                              // Options.RingRecipe: 0 or 1 (Recipe1), 2 (Recipe2)
//	  "username": "app",                             // ACL user of every shard
//	  "password_env": "REDIS_PASSWORD",              // name of the variable holding the password
//	  "db": 0,
//	  "tls": false,                                  // TLS 1.2+, server name from each addr
//	  "sentinel_username": "", "sentinel_password_env": "", // Sentinel's own ACL user and password
//	  "pool_size": 0, "dial_timeout": "5s", "read_timeout": "3s", "write_timeout": "3s",
//	  "health": {                                    // Options.Health
//	    "disable": false, "interval": "500ms", "timeout": "500ms",
//	    "failure_threshold": 2, "recovery_threshold": 2,
//	    "failover": false, "gutter_ttl": "30s"
//	  },
//	  "hot_keys": {                                  // Options.HotKeys; absent: off
//	    "mitigation": "local-cache",                 // or "split"; required in hot_keys
//	    "max_staleness": "1s", "cache_bytes": 0, "copies": 0,
//	    "tracking": "auto",                          // "auto", "off" or "on"
//	    "detector": {"window": "10s", "min_rate": 100, "min_share": 0.01,
//	                 "capacity": 0, "hysteresis": 0}
//	  }
//	}
//
// (JSON has no comments; they are here for the reader only.)
//
// Secrets are never read from the file: password_env names an environment
// variable, and LoadConfig fails if that variable is not set. username,
// password_env, db, tls, pool_size and the timeouts fill
// Options.ShardOptions, the template of every shard's client; when none of
// them is set ShardOptions is nil (go-redis defaults).
//
// A shard has either "addr" or "sentinel": the name of the master its
// Sentinels monitor and at least one Sentinel host:port. Its Shard.Failover
// gets the same connection settings (username, password, db, tls,
// pool_size, timeouts) and Sentinel's own credentials, sentinel_username
// and sentinel_password_env (the name of a variable, like password_env);
// Options.FailoverShardOptions holds them too, for the Sentinel shards of
// a registry's document.
//
// The options are then validated exactly as NewClient validates them (see
// Options.Validate); errors match its sentinels (ErrInvalidOptions,
// ErrNoShards, ErrDuplicateName, ErrInvalidWeight, ErrInvalidHealthOptions,
// ...) and name the file and the field as the file spells it.
func LoadConfig(path string) (*Options, error) {
	return loadConfig(path, true)
}

// LoadConfigWithoutSecrets reads a configuration file as LoadConfig does,
// with the same checks and errors, but reads no secret: the variables that
// password_env and sentinel_password_env name are not looked up, need not
// be set, and the passwords of the Options it returns are empty. It is for
// tools that read a file's shards and placement and contact no server
// (redshard plan and shares); a client built from its Options cannot
// authenticate where the file asks for a password.
func LoadConfigWithoutSecrets(path string) (*Options, error) {
	return loadConfig(path, false)
}

// loadConfig reads and parses the file at path; secrets says whether the
// passwords are read from the environment.
func loadConfig(path string, secrets bool) (*Options, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("redshard: config: %w", err)
	}
	opt, err := parseConfig(data, secrets)
	if err != nil {
		return nil, fmt.Errorf("redshard: config %s: %w", path, err)
	}
	return opt, nil
}

// fileConfig is the JSON form of a configuration file. Durations are kept
// as strings and parsed afterwards, so their errors can name the field.
type fileConfig struct {
	Shards          []fileShard `json:"shards"`
	VnodesPerWeight int         `json:"vnodes_per_weight"`
	RingRecipe      int         `json:"ring_recipe"`
	Username        string      `json:"username"`
	PasswordEnv     string      `json:"password_env"`
	DB              int         `json:"db"`
	TLS             bool        `json:"tls"`
	PoolSize        int         `json:"pool_size"`
	DialTimeout     string      `json:"dial_timeout"`
	ReadTimeout     string      `json:"read_timeout"`
	WriteTimeout    string      `json:"write_timeout"`
	// Sentinel's own credentials, for every Sentinel shard.
	SentinelUsername    string       `json:"sentinel_username"`
	SentinelPasswordEnv string       `json:"sentinel_password_env"`
	Health              *fileHealth  `json:"health"`
	HotKeys             *fileHotKeys `json:"hot_keys"`
}

type fileShard struct {
	Name     string        `json:"name"`
	Addr     string        `json:"addr"`
	Sentinel *fileSentinel `json:"sentinel"` // instead of addr
	Weight   *float64      `json:"weight"`   // nil: absent, the default; an explicit 0 is refused
}

// fileSentinel names a Sentinel-managed primary: its master name and the
// Sentinels that know it.
type fileSentinel struct {
	Master string   `json:"master"`
	Addrs  []string `json:"addrs"`
}

// shard is the Shard s describes. A weight left out is the default (0);
// parseConfig refuses an explicit 0 before it gets here. A Sentinel
// shard's Failover holds the master name and the Sentinels' addresses
// only: the connection settings are the reading process's
// (Options.withConnection).
func (s fileShard) shard() Shard {
	sh := Shard{Name: s.Name, Addr: s.Addr}
	if s.Weight != nil {
		sh.Weight = *s.Weight
	}
	if s.Sentinel != nil {
		sh.Failover = &redis.FailoverOptions{MasterName: s.Sentinel.Master, SentinelAddrs: slices.Clone(s.Sentinel.Addrs)}
	}
	return sh
}

// check refuses an entry that does not say which server the shard is:
// both "addr" and "sentinel", or neither, or a sentinel without a master or
// Sentinels, or with a Sentinel address that cannot be dialled. The rest
// is left to Options.Validate. i is the entry's index in "shards".
func (s fileShard) check(i int) error {
	field := fmt.Sprintf("Shards[%d]", i)
	switch {
	case s.Addr != "" && s.Sentinel != nil:
		return fmt.Errorf("shards[%d]: %w", i, invalid(ErrInvalidAddr, field,
			"shard %q has both \"addr\" and \"sentinel\": give the address of a server, or the Sentinels of a master, not both", s.Name))
	case s.Addr == "" && s.Sentinel == nil:
		return fmt.Errorf("shards[%d]: %w", i, invalid(ErrEmptyAddr, field,
			"shard %q has neither \"addr\" nor \"sentinel\"", s.Name))
	case s.Sentinel == nil:
		return nil
	case s.Sentinel.Master == "":
		return fmt.Errorf("shards[%d].sentinel.master: %w", i, invalid(ErrEmptyAddr, field+".Failover.MasterName",
			"shard %q: empty: name the master the Sentinels monitor", s.Name))
	case len(s.Sentinel.Addrs) == 0:
		return fmt.Errorf("shards[%d].sentinel.addrs: %w", i, invalid(ErrEmptyAddr, field+".Failover.SentinelAddrs",
			"shard %q: no Sentinel: list at least one host:port", s.Name))
	}
	for j, a := range s.Sentinel.Addrs {
		err := checkAddr(Shard{Addr: a})
		if err == nil && strings.HasPrefix(a, "/") {
			err = fmt.Errorf("%q: a Sentinel is reached at host:port, not a Unix socket", a)
		}
		if err != nil {
			return fmt.Errorf("shards[%d].sentinel.addrs[%d]: %w", i, j, invalid(ErrInvalidAddr,
				fmt.Sprintf("%s.Failover.SentinelAddrs[%d]", field, j), "shard %q: %v", s.Name, err))
		}
	}
	return nil
}

type fileHealth struct {
	Disable           bool   `json:"disable"`
	Interval          string `json:"interval"`
	Timeout           string `json:"timeout"`
	FailureThreshold  int    `json:"failure_threshold"`
	RecoveryThreshold int    `json:"recovery_threshold"`
	Failover          bool   `json:"failover"`
	GutterTTL         string `json:"gutter_ttl"`
}

type fileHotKeys struct {
	Mitigation   string        `json:"mitigation"`
	MaxStaleness string        `json:"max_staleness"`
	CacheBytes   int64         `json:"cache_bytes"`
	Copies       int           `json:"copies"`
	Tracking     string        `json:"tracking"`
	Detector     *fileDetector `json:"detector"`
}

type fileDetector struct {
	Window     string  `json:"window"`
	MinRate    float64 `json:"min_rate"`
	MinShare   float64 `json:"min_share"`
	Capacity   int     `json:"capacity"`
	Hysteresis float64 `json:"hysteresis"`
}

// parseConfig decodes and validates the contents of a configuration file.
// Its errors name the field but not the file. secrets says whether the
// passwords are read from the variables the file names; without, those
// variables are not looked up and the passwords stay empty.
func parseConfig(data []byte, secrets bool) (*Options, error) {
	// Editors on Windows save UTF-8 with a byte-order mark; JSON has no use
	// for it.
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	if err := strictjson.CheckDepth(data, maxConfigDepth); err != nil {
		return nil, fmt.Errorf("malformed configuration: %v (the format nests at most 5 deep)", err)
	}
	if err := strictjson.CheckDuplicates(data); err != nil {
		return nil, err
	}
	var fc fileConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return nil, jsonError(data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the JSON object at %s", strictjson.Position(data, dec.InputOffset()))
	}

	opt := &Options{VnodesPerWeight: fc.VnodesPerWeight, RingRecipe: fc.RingRecipe}
	if fc.Shards == nil {
		return nil, fmt.Errorf("shards: %w (the field is required)", ErrNoShards)
	}
	for i, s := range fc.Shards {
		if err := s.check(i); err != nil {
			return nil, err
		}
		if s.Weight != nil && *s.Weight == 0 {
			return nil, fmt.Errorf("shards[%d].weight: %w", i, invalid(ErrInvalidWeight, fmt.Sprintf("Shards[%d].Weight", i),
				"shard %q: an explicit 0 does not drain a shard, and is refused; leave the field out for the default weight 1, "+
					"or drain the shard by removing it from the list (redshard plan --remove, then redshard rebalance --remove, "+
					"or redshard apply for a fleet: docs/operations.md, \"Adding (or removing) a shard safely\")", s.Name))
		}
		opt.Shards = append(opt.Shards, s.shard())
	}

	d := strictjson.Durations{}
	so := &redis.Options{
		Username:     fc.Username,
		DB:           fc.DB,
		PoolSize:     fc.PoolSize,
		DialTimeout:  d.Parse("dial_timeout", fc.DialTimeout),
		ReadTimeout:  d.Parse("read_timeout", fc.ReadTimeout),
		WriteTimeout: d.Parse("write_timeout", fc.WriteTimeout),
	}
	switch {
	case d.Err != nil:
		return nil, d.Err
	case so.DialTimeout < 0 || so.ReadTimeout < 0 || so.WriteTimeout < 0:
		return nil, errors.New("dial_timeout, read_timeout, write_timeout: must not be negative")
	case fc.DB < 0:
		return nil, fmt.Errorf("db: %d is negative", fc.DB)
	case fc.PoolSize < 0:
		return nil, fmt.Errorf("pool_size: %d is negative", fc.PoolSize)
	}
	if fc.PasswordEnv != "" && secrets {
		pw, ok := os.LookupEnv(fc.PasswordEnv)
		if !ok {
			return nil, fmt.Errorf("password_env: environment variable %s is not set", fc.PasswordEnv)
		}
		so.Password = pw
	}
	if fc.TLS {
		// ServerName is left empty: go-redis's dialer takes it from each
		// shard's address.
		so.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if fc.Username != "" || fc.PasswordEnv != "" || fc.DB != 0 || fc.TLS || fc.PoolSize != 0 ||
		so.DialTimeout != 0 || so.ReadTimeout != 0 || so.WriteTimeout != 0 {
		opt.ShardOptions = so
	}
	if fc.SentinelUsername != "" || fc.SentinelPasswordEnv != "" || slices.ContainsFunc(fc.Shards, func(s fileShard) bool { return s.Sentinel != nil }) {
		fo := failoverTemplate(so)
		fo.SentinelUsername = fc.SentinelUsername
		if fc.SentinelPasswordEnv != "" && secrets {
			pw, ok := os.LookupEnv(fc.SentinelPasswordEnv)
			if !ok {
				return nil, fmt.Errorf("sentinel_password_env: environment variable %s is not set", fc.SentinelPasswordEnv)
			}
			fo.SentinelPassword = pw
		}
		opt.FailoverShardOptions = fo
	}
	opt.Shards = opt.withConnection(opt.Shards)

	if fc.Health != nil {
		h, err := fc.Health.options()
		if err != nil {
			return nil, err
		}
		opt.Health = h
	}
	if fc.HotKeys != nil {
		h, err := fc.HotKeys.options()
		if err != nil {
			return nil, err
		}
		opt.HotKeys = h
	}
	// Everything else is checked where NewClient checks it.
	if err := opt.Validate(); err != nil {
		var oe *optionError
		if errors.As(err, &oe) && oe.field != "" {
			return nil, fmt.Errorf("%s: %w", strictjson.SnakePath(oe.field), err)
		}
		return nil, err
	}
	return opt, nil
}

// maxConfigDepth bounds how deeply a configuration file may nest lists and
// objects. The format itself nests 5 deep (the file, "shards", a shard,
// "sentinel", "addrs"); the bound leaves room for that and refuses, at
// once and with a clear error, a file that could only be a mistake or an
// attack.
const maxConfigDepth = 32

func (fh *fileHealth) options() (*HealthOptions, error) {
	d := strictjson.Durations{}
	h := &HealthOptions{
		Disable:           fh.Disable,
		Interval:          d.Parse("health.interval", fh.Interval),
		Timeout:           d.Parse("health.timeout", fh.Timeout),
		FailureThreshold:  fh.FailureThreshold,
		RecoveryThreshold: fh.RecoveryThreshold,
		Failover:          fh.Failover,
		GutterTTL:         d.Parse("health.gutter_ttl", fh.GutterTTL),
	}
	return h, d.Err
}

func (fh *fileHotKeys) options() (*HotKeyOptions, error) {
	h := &HotKeyOptions{CacheBytes: fh.CacheBytes, Copies: fh.Copies}
	switch strings.ToLower(fh.Mitigation) {
	case "local-cache", "localcache":
		h.Mitigation = LocalCache
	case "split", "split-copies":
		h.Mitigation = SplitCopies
	case "":
		return nil, fmt.Errorf("hot_keys.mitigation: %w", invalid(ErrInvalidHotKeyOptions, "HotKeys.Mitigation", `required: "local-cache" or "split"`))
	default:
		return nil, fmt.Errorf("hot_keys.mitigation: %w", invalid(ErrInvalidHotKeyOptions, "HotKeys.Mitigation", `%q: want "local-cache" or "split"`, fh.Mitigation))
	}
	switch strings.ToLower(fh.Tracking) {
	case "", "auto":
		h.Tracking = TrackingAuto
	case "off":
		h.Tracking = TrackingOff
	case "on":
		h.Tracking = TrackingOn
	default:
		return nil, fmt.Errorf("hot_keys.tracking: %w", invalid(ErrInvalidHotKeyOptions, "HotKeys.Tracking", `%q: want "auto", "off" or "on"`, fh.Tracking))
	}
	d := strictjson.Durations{}
	h.MaxStaleness = d.Parse("hot_keys.max_staleness", fh.MaxStaleness)
	if fd := fh.Detector; fd != nil {
		h.Detector = &hotkey.Config{
			Window:     d.Parse("hot_keys.detector.window", fd.Window),
			MinRate:    fd.MinRate,
			MinShare:   fd.MinShare,
			Capacity:   fd.Capacity,
			Hysteresis: fd.Hysteresis,
		}
	}
	return h, d.Err
}

// jsonError rewrites a decoding error so that it names the field or the
// line and column.
func jsonError(data []byte, err error) error {
	switch {
	case errors.Is(err, io.EOF):
		return errors.New("empty file: want a JSON object with at least \"shards\"")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("malformed JSON: the file ends in the middle of the object")
	}
	if name, ok := strictjson.UnknownField(err); ok {
		return fmt.Errorf("unknown field %s (check its spelling; the format is in docs/operations.md)", name)
	}
	return strictjson.DecodeError(data, err)
}
