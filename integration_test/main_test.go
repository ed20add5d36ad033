// Package integration_test runs redshard's pieces against real redis-server
// processes that the tests start themselves (internal/redistest).
package integration_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
