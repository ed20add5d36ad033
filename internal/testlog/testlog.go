// Package testlog keeps go-redis's log lines out of the output of the
// project's tests. go-redis logs each failed dial of every pool, so a test
// that kills or stops a server used to print hundreds of
// "redis: connection pool: failed to dial ..." lines around the one FAIL
// line that mattered.
package testlog

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// VerboseEnv, set to 1, makes the logger GoRedis installs write each line
// as it comes, as go-redis's default logger does.
const VerboseEnv = "REDSHARD_TEST_REDIS_LOG"

// Counter is a go-redis logger (redis.SetLogger) that counts the lines
// and keeps the first, or with verbose writes each to w. It is safe for
// concurrent use.
type Counter struct {
	w       io.Writer
	verbose bool

	mu    sync.Mutex // guards n and first
	n     int
	first string
}

// Printf counts one line of go-redis's log.
func (c *Counter) Printf(_ context.Context, format string, v ...any) {
	msg := strings.TrimSuffix(fmt.Sprintf(format, v...), "\n")
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.n == 1 {
		c.first = msg
	}
	if c.verbose {
		fmt.Fprintf(c.w, "redis: %s\n", msg)
	}
}

// Summary is one line saying how many lines go-redis logged and the first,
// or "" when it logged none.
func (c *Counter) Summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 || c.verbose {
		return ""
	}
	return fmt.Sprintf("go-redis logged %d lines during the tests, the first: %q (%s=1 prints them all)", c.n, c.first, VerboseEnv)
}

// GoRedis routes go-redis's process-wide logger to a Counter writing to
// stderr, verbose when VerboseEnv is 1. Call it in TestMain, before the
// tests run; report prints the summary on stderr, after them.
func GoRedis() (report func()) {
	c := &Counter{w: os.Stderr, verbose: os.Getenv(VerboseEnv) == "1"}
	redis.SetLogger(c)
	return func() {
		if s := c.Summary(); s != "" {
			fmt.Fprintln(os.Stderr, s)
		}
	}
}
