package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRedisLogRoutine: go-redis's routine lines (a Sentinel client naming
// the primary it selected) are kept apart from its failures: alone they
// print no summary, and beside failures the summary names and counts the
// failures only. --verbose still shows every line.
func TestRedisLogRoutine(t *testing.T) {
	ctx := context.Background()
	routine := func(l *cliLogger) {
		l.Printf(ctx, "sentinel: selected addr=%s masterAddr=%s", "127.0.0.1:26379", "127.0.0.1:7001")
		l.Printf(ctx, "sentinel: new master=%q addr=%q", "cache-s", "127.0.0.1:7001")
		l.Printf(ctx, "sentinel: discovered new sentinel=%q for master=%q", "x", "cache-s")
	}
	failure := func(l *cliLogger) {
		l.Printf(ctx, "redis: connection pool: failed to dial after %d attempts: %v", 5, "dial tcp 127.0.0.1:1: connect: connection refused")
	}

	var buf bytes.Buffer
	l := &cliLogger{}
	l.start(&buf)
	routine(l)
	l.stop("apply")
	if buf.Len() != 0 {
		t.Errorf("routine lines alone: stderr %q, want nothing", buf.String())
	}

	buf.Reset()
	l.start(&buf)
	routine(l)
	failure(l)
	routine(l)
	failure(l)
	l.stop("apply")
	want := `redshard apply: go-redis logged "redis: connection pool: failed to dial after 5 attempts: dial tcp 127.0.0.1:1: connect: connection refused" and 1 more`
	if got := buf.String(); !strings.HasPrefix(got, want) || strings.Contains(got, "sentinel:") {
		t.Errorf("routine lines and two failures: stderr %q, want %q... naming the failures only", got, want)
	}

	buf.Reset()
	l.start(&buf)
	l.setVerbose(true)
	routine(l)
	failure(l)
	l.stop("apply")
	if got := buf.String(); strings.Count(got, "\n") != 4 || !strings.Contains(got, "redis: sentinel: selected addr=") {
		t.Errorf("--verbose: stderr %q, want every one of the 4 lines", got)
	}
}
