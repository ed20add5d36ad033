package redshard

import (
	"testing"
	"time"
)

// TestHotKeyOptionsTrackedLifetime: a MaxStaleness left zero is 1s for
// untracked replies and split copies and DefaultTrackedLifetime for
// tracked replies; one that is set applies to both.
func TestHotKeyOptionsTrackedLifetime(t *testing.T) {
	for _, c := range []struct {
		set, stale, tracked time.Duration
	}{
		{0, DefaultMaxStaleness, DefaultTrackedLifetime},
		{5 * time.Second, 5 * time.Second, 5 * time.Second},
		{time.Hour, time.Hour, time.Hour},
	} {
		o := HotKeyOptions{Mitigation: LocalCache, MaxStaleness: c.set}
		r, err := o.resolve(1)
		if err != nil {
			t.Fatal(err)
		}
		if r.MaxStaleness != c.stale || r.trackedLifetime != c.tracked {
			t.Errorf("MaxStaleness %v resolves to %v, tracked %v; want %v, tracked %v",
				c.set, r.MaxStaleness, r.trackedLifetime, c.stale, c.tracked)
		}
	}
	if DefaultTrackedLifetime != time.Minute || DefaultMaxStaleness != time.Second {
		t.Errorf("defaults %v, %v; the docs say 1m and 1s", DefaultTrackedLifetime, DefaultMaxStaleness)
	}
}
