package localcache

import "testing"

// TestDefaultKeyStripesFollowMaxBytes: left zero, KeyStripes is MaxBytes/256
// as a power of two, at least DefaultKeyStripes and at most MaxKeyStripes;
// set, it is only rounded up.
func TestDefaultKeyStripesFollowMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		cfg  *Config
		want int
	}{
		{nil, 1 << 18}, // the default 64 MiB
		{&Config{MaxBytes: 1 << 20}, DefaultKeyStripes},
		{&Config{MaxBytes: 100 << 20}, 1 << 19},
		{&Config{MaxBytes: 1 << 40}, MaxKeyStripes},
		{&Config{MaxBytes: 1 << 20, KeyStripes: 3}, 4},
	} {
		c, err := tc.cfg.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if c.KeyStripes != tc.want {
			t.Errorf("%+v: KeyStripes %d, want %d", tc.cfg, c.KeyStripes, tc.want)
		}
	}
}
