package parallel

import (
	"testing"

	"go.uber.org/goleak"
)

// Run's goroutines must all have returned when it does.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
