package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// redisLog is where go-redis's log lines go (redis.SetLogger): a run that
// kills a shard makes every pool log each failed dial, which would bury the
// report. Quiet by default, it counts the lines and run prints one summary
// of the failures; with --verbose it writes each line to stderr as well.
// go-redis also logs routine events (a Sentinel client naming the primary
// it selected): those are kept apart, never summarized as if they had
// failed, and shown only with --verbose.
//
// go-redis has one logger per process, so there is one redisLog. It is safe
// for concurrent use.
var redisLog = &cliLogger{}

func init() { redis.SetLogger(redisLog) }

// cliLogger implements go-redis's logging interface (Printf).
type cliLogger struct {
	mu      sync.Mutex // guards the fields below
	w       io.Writer  // stderr of the current run; nil between runs
	verbose bool
	n       int    // lines logged since start, routine ones left out
	first   string // the first of them
}

// routinePrefixes start the lines go-redis logs when things go as they
// should: a Sentinel client reporting the primary it found, a new primary
// after a failover, a Sentinel it discovered. Any other line counts as a
// failure, including lines this list does not know yet.
var routinePrefixes = []string{
	"sentinel: selected addr=",
	"sentinel: new master=",
	"sentinel: discovered new sentinel=",
}

// routineLine reports whether msg is one of go-redis's routine lines.
func routineLine(msg string) bool {
	for _, p := range routinePrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// start begins a run that writes to stderr: the count restarts at zero.
func (l *cliLogger) start(stderr io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w, l.verbose, l.n, l.first = stderr, false, 0, ""
}

// setVerbose makes Printf write every line (the --verbose flag).
func (l *cliLogger) setVerbose(v bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.verbose = v
}

// stop ends the run of the subcommand called name: unless verbose, it
// prints how many lines other than routine ones go-redis logged, and the
// first. Lines logged later (by a connection pool still closing) are
// dropped.
func (l *cliLogger) stop(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil && !l.verbose && l.n > 0 {
		more := ""
		if l.n > 1 {
			more = fmt.Sprintf(" and %d more", l.n-1)
		}
		fmt.Fprintf(l.w, "redshard %s: go-redis logged %q%s (--verbose shows every line)\n", name, l.first, more)
	}
	l.w = nil
}

// Printf counts one line of go-redis's log unless it is routine, and
// writes it when verbose.
func (l *cliLogger) Printf(_ context.Context, format string, v ...any) {
	msg := strings.TrimSuffix(fmt.Sprintf(format, v...), "\n")
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return
	}
	if !routineLine(msg) {
		l.n++
		if l.n == 1 {
			l.first = msg
		}
	}
	if l.verbose {
		fmt.Fprintf(l.w, "redis: %s\n", msg)
	}
}
