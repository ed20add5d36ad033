package ring_test

import (
	"testing"

	"go.uber.org/goleak"
)

// New and With hash and sort on several goroutines, and the benchmarks start
// go-redis Rings; all of them must be gone when the tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
