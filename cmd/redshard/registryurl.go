package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/registry/etcdregistry"
)

// registryPasswordEnv names the environment variable holding the password
// of a Redis registry: secrets are never part of the URL.
const registryPasswordEnv = "REDSHARD_REGISTRY_PASSWORD"

// registryURL is a parsed --registry: redis://host:port/NAME or
// etcd://host:port/PREFIX.
type registryURL struct {
	scheme string // "redis" or "etcd"
	addr   string // host:port
	name   string // the Redis registry's name, or the etcd key prefix (with its leading "/")
}

func (u registryURL) String() string {
	if u.scheme == "etcd" {
		return "etcd://" + u.addr + u.name
	}
	return "redis://" + u.addr + "/" + u.name
}

// parseRegistryURL parses a --registry value. The port is required; the
// Redis name is the path after the first "/" (it may hold ":" and "/"),
// the etcd prefix the whole path. Its errors show s redacted (redactURL):
// a password given in the URL is refused, never echoed.
func parseRegistryURL(s string) (registryURL, error) {
	shown := redactURL(s)
	scheme, _, ok := strings.Cut(s, "://")
	if !ok || (scheme != "redis" && scheme != "etcd") {
		return registryURL{}, fmt.Errorf("%q: want redis://host:port/NAME or etcd://host:port/PREFIX", shown)
	}
	u, err := url.Parse(s)
	if err != nil {
		// A *url.Error quotes the URL it could not parse: keep its reason only.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return registryURL{}, fmt.Errorf("%q: %v", shown, err)
	}
	r := registryURL{scheme: scheme}
	switch {
	case u.User != nil:
		return registryURL{}, fmt.Errorf("%q: credentials are not read from the URL (set %s for a Redis password)", shown, registryPasswordEnv)
	case u.RawQuery != "" || u.Fragment != "":
		return registryURL{}, fmt.Errorf("%q: the URL takes no query or fragment", shown)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" {
		return registryURL{}, fmt.Errorf("%q: want host:port after %s://", shown, u.Scheme)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return registryURL{}, fmt.Errorf("%q: bad port %q", shown, port)
	}
	r.addr = u.Host
	path := u.Path
	if r.scheme == "redis" {
		r.name = strings.TrimPrefix(path, "/")
	} else {
		r.name = path
	}
	if strings.Trim(r.name, "/") == "" {
		what := "NAME (e.g. redis://" + u.Host + "/redshard:registry:web)"
		if r.scheme == "etcd" {
			what = "PREFIX (e.g. etcd://" + u.Host + "/redshard/registry/web)"
		}
		return registryURL{}, fmt.Errorf("%q: no registry %s", shown, what)
	}
	return r, nil
}

// redacted replaces a secret in what redactURL shows.
const redacted = "xxxxx"

// redactURL returns s as it may be printed: its userinfo (user and
// password: a password may be spelled as the user), the values of its
// query and its fragment replaced by xxxxx. A string that does not parse
// as a URL with a host loses everything before its last "@".
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		if u.User != nil {
			u.User = url.User(redacted)
		}
		if u.RawQuery != "" {
			q := u.Query()
			for k := range q {
				q[k] = []string{redacted}
			}
			u.RawQuery = q.Encode()
		}
		if u.Fragment != "" {
			u.Fragment, u.RawFragment = redacted, ""
		}
		return u.String()
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		s = redacted + s[i:]
	}
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i+1] + redacted
	}
	return s
}

// registryFlag registers --registry on f.
func registryFlag(f *flags) *string {
	return f.String("registry", "", "the fleet's registry: `URL` redis://host:port/NAME (NAME e.g. redshard:registry:web) or etcd://host:port/PREFIX")
}

// defaultRegistryTimeout is --registry-timeout's default.
const defaultRegistryTimeout = 5 * time.Second

// registryTimeoutFlag registers --registry-timeout on f.
func registryTimeoutFlag(f *flags) *time.Duration {
	return f.Duration("registry-timeout", defaultRegistryTimeout,
		"how long to wait for the registry to answer the first reads (connecting included) before giving up")
}

// registryTimeoutArg checks --registry-timeout.
func registryTimeoutArg(d time.Duration) error {
	if d <= 0 {
		return usagef("--registry-timeout %v: must be positive", d)
	}
	return nil
}

// registryErr explains why the first reads of the registry u failed under
// rctx, a context bounded by --registry-timeout d: a registry that did not
// answer in time is named, with the flag that bounds the wait. u prints
// no credentials (parseRegistryURL refuses them).
func registryErr(rctx context.Context, u registryURL, d time.Duration, what string, err error) error {
	if errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: the registry %s did not answer within %v (--registry-timeout): %w", what, u, d, err)
	}
	return fmt.Errorf("%s %s: %w", what, u, err)
}

// registryArg parses the --registry flag, which is required.
func registryArg(v string) (registryURL, error) {
	if v == "" {
		return registryURL{}, usagef("no registry: give --registry redis://host:port/NAME or etcd://host:port/PREFIX")
	}
	u, err := parseRegistryURL(v)
	if err != nil {
		return registryURL{}, usagef("--registry %w", err)
	}
	return u, nil
}

// openRegistry connects to the registry u names. Closing what it returns
// closes the registry and then its client. A Redis registry name that
// does not start with "redshard:" gets a warning on stderr: redshard
// clients hide such keys and Rebalance never moves them, should the
// registry share a server with data.
func openRegistry(u registryURL, stderr io.Writer) (registry.Registry, func(), error) {
	switch u.scheme {
	case "redis":
		if !strings.HasPrefix(u.name, "redshard:") && !strings.HasPrefix(u.name, "{redshard:") {
			fmt.Fprintf(stderr, "redshard: warning: registry name %q does not start with \"redshard:\"; if the registry's server holds data too, redshard clients will see its keys as data (and Rebalance may move them)\n", u.name)
		}
		rdb := redis.NewClient(&redis.Options{
			Addr:        u.addr,
			Password:    os.Getenv(registryPasswordEnv),
			DialTimeout: 5 * time.Second,
		})
		reg, err := registry.NewRedisOptions(rdb, u.name, nil)
		if err != nil {
			_ = rdb.Close()
			return nil, nil, err
		}
		return reg, func() { _ = reg.Close(); _ = rdb.Close() }, nil
	case "etcd":
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   []string{"http://" + u.addr},
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("etcd %s: %w", u.addr, err)
		}
		reg, err := etcdregistry.NewOptions(cli, u.name, nil)
		if err != nil {
			_ = cli.Close()
			return nil, nil, err
		}
		return reg, func() { _ = reg.Close(); _ = cli.Close() }, nil
	}
	return nil, nil, fmt.Errorf("registry %s: unknown scheme", u)
}
