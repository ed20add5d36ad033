package redshard_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/redshard/redshard/internal/testlog"
)

func TestMain(m *testing.M) {
	// go-redis's lines (a failed dial per pool when a test stops a server)
	// are counted, not printed: they buried the one FAIL line that mattered.
	report := testlog.GoRedis()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		report()
		os.Exit(code)
	}))
}
