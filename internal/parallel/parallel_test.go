package parallel

import (
	"sync/atomic"
	"testing"
)

func TestRunCallsEachIndexOnce(t *testing.T) {
	for _, n := range []int{-1, 0, 1, 2, 7} {
		var seen [7]atomic.Int32
		Run(n, func(i int) { seen[i].Add(1) })
		for i := range seen {
			want := int32(0)
			if i < n {
				want = 1
			}
			if got := seen[i].Load(); got != want {
				t.Errorf("n=%d: fn(%d) called %d times, want %d", n, i, got, want)
			}
		}
	}
}
