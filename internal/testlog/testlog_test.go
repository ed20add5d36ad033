package testlog

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestCounter: quiet, the lines are counted and summarized in one line;
// verbose, each is written and there is no summary.
func TestCounter(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	c := &Counter{w: &buf}
	if s := c.Summary(); s != "" {
		t.Errorf("Summary before any line = %q, want none", s)
	}
	for i := range 3 {
		c.Printf(ctx, "redis: connection pool: failed to dial after %d attempts: %v\n", i, "refused")
	}
	if buf.Len() != 0 {
		t.Errorf("quiet counter wrote %q", buf.String())
	}
	want := `go-redis logged 3 lines during the tests, the first: "redis: connection pool: failed to dial after 0 attempts: refused"`
	if s := c.Summary(); !strings.HasPrefix(s, want) {
		t.Errorf("Summary = %q, want %q...", s, want)
	}

	v := &Counter{w: &buf, verbose: true}
	v.Printf(ctx, "sentinel: selected addr=%s", "x:1")
	if got := buf.String(); got != "redis: sentinel: selected addr=x:1\n" || v.Summary() != "" {
		t.Errorf("verbose: wrote %q, Summary %q", got, v.Summary())
	}
}
