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
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/hotkey"
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
	if err := checkDepth(data); err != nil {
		return nil, err
	}
	if err := checkDuplicateFields(data); err != nil {
		return nil, err
	}
	var fc fileConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return nil, jsonError(data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the JSON object at %s", position(data, dec.InputOffset()))
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

	d := durations{}
	so := &redis.Options{
		Username:     fc.Username,
		DB:           fc.DB,
		PoolSize:     fc.PoolSize,
		DialTimeout:  d.parse("dial_timeout", fc.DialTimeout),
		ReadTimeout:  d.parse("read_timeout", fc.ReadTimeout),
		WriteTimeout: d.parse("write_timeout", fc.WriteTimeout),
	}
	switch {
	case d.err != nil:
		return nil, d.err
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
			return nil, fmt.Errorf("%s: %w", jsonField(oe.field), err)
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

// checkDepth refuses a file that nests lists and objects deeper than
// maxConfigDepth, naming where the limit is crossed. It reads each byte
// once, skipping strings (a bracket in a string is no nesting); a syntax
// error is left to the decoder, which words it.
func checkDepth(data []byte) error {
	depth := 0
	inString, escaped := false, false
	for i, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > maxConfigDepth {
				return fmt.Errorf("malformed configuration: lists and objects nested deeper than %d at %s (the format nests at most 5 deep)",
					maxConfigDepth, position(data, int64(i)))
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return nil
}

// checkDuplicateFields refuses an object, at any depth, that names a field
// twice: encoding/json would keep the last value silently. Names are
// compared as encoding/json matches them, ignoring case. The error gives
// the field's path as the file spells it ("shards[1].addr") and where the
// second one is. Syntax errors are left to the decoder, which words them.
func checkDuplicateFields(data []byte) error {
	// Each frame keeps only its own step of the path (".addr", "[1]"): the
	// whole path is built once, for the error, so the check stays linear
	// in the file's size whatever its depth.
	type frame struct {
		object bool
		keys   map[string]bool // lower-cased names seen in this object
		key    bool            // in an object: the next token is a key or '}'
		step   string          // this object's or list's step from its parent
		index  int             // in a list: the next element's index
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*frame
	var keyStep string // step of the value after the key just read
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF, or a syntax error the decoder reports
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if tok == json.Delim('}') {
				stack = stack[:len(stack)-1]
				continue
			}
			k, _ := tok.(string) // an object's keys are strings
			keyStep = "." + k
			low := strings.ToLower(k)
			if top.keys[low] {
				var b strings.Builder
				for _, f := range stack {
					b.WriteString(f.step)
				}
				b.WriteString(keyStep)
				return fmt.Errorf("%s: the field is given twice (again at %s); keep one",
					strings.TrimPrefix(b.String(), "."), position(data, dec.InputOffset()))
			}
			top.keys[low] = true
			top.key = false
			continue
		}
		step := keyStep
		switch {
		case top != nil && top.object:
			top.key = true // after this value: a key or '}'
		case top != nil:
			step = "[" + strconv.Itoa(top.index) + "]"
			top.index++
		default:
			step = ""
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, key: true, step: step})
		case json.Delim('['):
			stack = append(stack, &frame{step: step})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// jsonField names an Options field ("Health.GutterTTL", "Shards[2].Weight")
// as the configuration file spells it ("health.gutter_ttl",
// "shards[2].weight").
func jsonField(field string) string {
	var b strings.Builder
	rs := []rune(field)
	for i, r := range rs {
		upper := r >= 'A' && r <= 'Z'
		if upper && i > 0 && rs[i-1] != '.' {
			prevLower := rs[i-1] >= 'a' && rs[i-1] <= 'z' || rs[i-1] >= '0' && rs[i-1] <= '9'
			nextLower := i+1 < len(rs) && rs[i+1] >= 'a' && rs[i+1] <= 'z'
			if prevLower || (nextLower && rs[i-1] >= 'A' && rs[i-1] <= 'Z') {
				b.WriteByte('_')
			}
		}
		if upper {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (fh *fileHealth) options() (*HealthOptions, error) {
	d := durations{}
	h := &HealthOptions{
		Disable:           fh.Disable,
		Interval:          d.parse("health.interval", fh.Interval),
		Timeout:           d.parse("health.timeout", fh.Timeout),
		FailureThreshold:  fh.FailureThreshold,
		RecoveryThreshold: fh.RecoveryThreshold,
		Failover:          fh.Failover,
		GutterTTL:         d.parse("health.gutter_ttl", fh.GutterTTL),
	}
	return h, d.err
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
	d := durations{}
	h.MaxStaleness = d.parse("hot_keys.max_staleness", fh.MaxStaleness)
	if fd := fh.Detector; fd != nil {
		h.Detector = &hotkey.Config{
			Window:     d.parse("hot_keys.detector.window", fd.Window),
			MinRate:    fd.MinRate,
			MinShare:   fd.MinShare,
			Capacity:   fd.Capacity,
			Hysteresis: fd.Hysteresis,
		}
	}
	return h, d.err
}

// durations parses duration fields and keeps the first error.
type durations struct{ err error }

// parse returns the duration s names ("" is 0). Its range is checked with
// the rest of the options.
func (d *durations) parse(field, s string) time.Duration {
	if s == "" || d.err != nil {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.err = fmt.Errorf("%s: %q is not a duration (write it like \"500ms\" or \"10m\")", field, s)
	}
	return v
}

// jsonError rewrites a decoding error so that it names the field or the
// line and column.
func jsonError(data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("malformed JSON at %s: %v", position(data, syn.Offset), syn)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(top level)"
		}
		return fmt.Errorf("%s: JSON %s where %s was expected (at %s)", field, typ.Value, jsonKind(typ.Type.Kind().String()), position(data, typ.Offset))
	case errors.Is(err, io.EOF):
		return errors.New("empty file: want a JSON object with at least \"shards\"")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("malformed JSON: the file ends in the middle of the object")
	}
	// The unknown-field error is not typed: its text is `json: unknown field "x"`.
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		return fmt.Errorf("unknown field %s (check its spelling; the format is in docs/operations.md)", strings.TrimPrefix(msg, "json: unknown field "))
	}
	return err
}

// jsonKind names a Go kind the way the file's author thinks of it.
func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice":
		return "a list"
	case "struct", "ptr":
		return "an object"
	}
	return "a number"
}

// position turns a byte offset into "line L, column C".
func position(data []byte, off int64) string {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(data[:off], '\n'))
	return fmt.Sprintf("line %d, column %d", line, col)
}
