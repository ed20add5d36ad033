package redshardotel_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutine, but the clients and miniredis shards of
// its tests do: each test must close what it started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
