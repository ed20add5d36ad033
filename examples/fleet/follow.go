package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/registry"
)

// followOptions configures one process of a real fleet.
type followOptions struct {
	URL, ID       string
	Workers, Keys int
	Duration      time.Duration // 0: until ctx ends
}

// follow runs one process of a real fleet: a client following the
// registry at o.URL, the workload on keys of its own ("fleet:<id>:<n>"),
// a status line every 2s, and at the end the checks and the deletion of
// the keys it wrote. It refuses to start if one of its keys exists.
func follow(ctx context.Context, out io.Writer, o followOptions) (*totals, error) {
	addr, name, err := parseRegistryURL(o.URL)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, Password: os.Getenv("REDSHARD_REGISTRY_PASSWORD")})
	defer rdb.Close()
	reg, err := registry.NewRedisOptions(rdb, name, nil)
	if err != nil {
		return nil, err
	}
	defer reg.Close()
	c, err := redshard.NewClient(&redshard.Options{Registry: reg, Fleet: &redshard.FleetOptions{MemberID: o.ID}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	st, _ := c.FleetStatus()
	id := st.Member.ID
	l := newLedger("fleet:"+id+":", o.Keys)
	if n, err := c.Exists(ctx, l.keys...).Result(); err != nil {
		return nil, err
	} else if n > 0 {
		return nil, fmt.Errorf("%d of this process's keys (fleet:%s:*) exist already: choose another -id", n, id)
	}
	fmt.Fprintf(out, "%s follows %s (%s), %d workers on %d keys fleet:%s:*\n", id, o.URL, st.Version, o.Workers, o.Keys, id)

	run := ctx
	if o.Duration > 0 {
		var cancel context.CancelFunc
		run, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	t := &totals{}
	var wg sync.WaitGroup
	for w := range o.Workers {
		wg.Go(func() { worker(run, c, l, w, o.Workers, t) })
	}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	var last registry.Version
	for run.Err() == nil {
		select {
		case <-run.Done():
		case <-tick.C:
			st, _ := c.FleetStatus()
			if st.Version != last || st.Fenced {
				fmt.Fprintf(out, "%s: on %s%s, ops %d, errors %d\n", id, st.Version, fencedMark(st.Fenced), t.Ops.Load(), t.Errors.Load())
				last = st.Version
			}
		}
	}
	wg.Wait()

	bg := context.WithoutCancel(ctx)
	if err := verify(bg, c, l, t); err != nil {
		return t, err
	}
	written := l.written()
	if len(written) > 0 {
		if err := c.Del(bg, written...).Err(); err != nil {
			return t, fmt.Errorf("deleting the keys this process wrote: %w", err)
		}
	}
	fmt.Fprintf(out, "%s: %s; deleted the %d keys it wrote\n", id, t, len(written))
	if err := t.FirstError(); err != nil {
		fmt.Fprintf(out, "%s: first error: %v\n", id, err)
	}
	return t, nil
}

func fencedMark(on bool) string {
	if on {
		return " (FENCED)"
	}
	return ""
}

// parseRegistryURL reads redis://host:port/NAME.
func parseRegistryURL(s string) (addr, name string, err error) {
	rest, ok := strings.CutPrefix(s, "redis://")
	if ok {
		addr, name, ok = strings.Cut(rest, "/")
	}
	if !ok || name == "" {
		return "", "", fmt.Errorf("-registry %q: want redis://host:port/NAME", s)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", "", fmt.Errorf("-registry %q: %w", s, err)
	}
	return addr, name, nil
}
