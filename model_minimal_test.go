package redshard_test

import (
	"testing"

	"github.com/redshard/redshard/internal/modelcheck"
)

// TestModelMinimal runs the known failures of TestModel reduced to short
// scripts (modelcheck.Minimal) on miniredis shards. Each is skipped with
// its reason unless -model.all.
func TestModelMinimal(t *testing.T) {
	for _, m := range modelcheck.Minimal {
		t.Run(m.Name, func(t *testing.T) {
			if m.Known != "" && !*modelAll {
				t.Skip(m.Known + " (-model.all runs it)")
			}
			modelcheck.RunScript(t, m.Script().Plan(), miniServers, nil)
		})
	}
}
