package main

import (
	"testing"

	"go.uber.org/goleak"
)

// The runner starts goroutines (configurations in parallel, a waiter per
// server); none may outlive the tests of its logic.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
