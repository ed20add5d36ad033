package etcdregistry_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(serveEnv); spec != "" {
		serve(spec)
	}
	goleak.VerifyTestMain(m)
}
