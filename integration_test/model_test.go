package integration_test

import (
	"flag"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/modelcheck"
	"github.com/redshard/redshard/internal/redistest"
)

// TestModel runs the model-based test of membership changes (package
// internal/modelcheck, the same scenarios and checks as the root
// package's TestModel on miniredis) against real redis-servers. A fault
// freezes a server (SIGSTOP: connections stay open, nothing is answered,
// data is kept) and thaws it later; commands to it time out and count as
// ambiguous.
//
//	go test ./integration_test -race -run TestModel
//	go test ./integration_test -race -run 'TestModel/held$' -model.seed 87 -model.ops 30
//
// (The package comes before the -model flags: go test hands everything
// after an unknown flag to the test binary.)
var (
	modelSeed  = flag.Uint64("model.seed", 0, "run only this seed (0: seeds 1..-model.seeds)")
	modelSeeds = flag.Int("model.seeds", 0, "seeds per scenario (default 2, 1 with -short)")
	modelOps   = flag.Int("model.ops", 200, "operations per history")
	modelAll   = flag.Bool("model.all", false, "also run the scenarios known to fail")
	modelPrint = flag.Int("model.print", 3, "failing seeds per scenario whose histories are printed")
)

func TestModel(t *testing.T) {
	for _, sc := range modelcheck.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			if sc.Known != "" && !*modelAll && *modelSeed == 0 {
				t.Skip(sc.Known + " (-model.all runs it)")
			}
			modelcheck.RunSeeds(t, modelcheck.SeedOptions{
				Scenario: sc, Seeds: modelSeedList(2, 1), Ops: *modelOps,
				Servers: redisServers, NewClient: newModelClient, Printed: *modelPrint, Verbose: *modelSeed != 0 && testing.Verbose(),
			})
		})
	}
}

// modelSeedList returns -model.seed alone, or seeds 1..-model.seeds
// (n by default, short with -short).
func modelSeedList(n, short int) []uint64 {
	switch {
	case *modelSeeds > 0:
		n = *modelSeeds
	case testing.Short():
		n = short
	}
	return modelcheck.SeedList(*modelSeed, n)
}

// newModelClient is modelcheck.NewClient with shorter timeouts: a frozen
// server's commands fail after a second rather than after two.
func newModelClient(shards []redshard.Shard) (*redshard.Client, error) {
	return redshard.NewClient(&redshard.Options{
		Shards: shards,
		Health: &redshard.HealthOptions{Disable: true},
		ShardOptions: &redis.Options{MaxRetries: -1, DialerRetries: 1, PoolSize: 1000, DialTimeout: time.Second,
			ReadTimeout: time.Second, WriteTimeout: time.Second},
	})
}

// redisServers starts n redis-servers; Down freezes one, Up thaws it.
func redisServers(t *testing.T, n int) []modelcheck.Server {
	out := make([]modelcheck.Server, n)
	for i := range out {
		s := redistest.Start(t)
		out[i] = modelcheck.Server{Addr: s.Addr(), Down: s.Freeze, Up: s.Thaw}
	}
	return out
}

// TestModelMinimal runs the known failures reduced to short scripts
// (modelcheck.Minimal) on redis-servers; skipped unless -model.all.
func TestModelMinimal(t *testing.T) {
	for _, m := range modelcheck.Minimal {
		t.Run(m.Name, func(t *testing.T) {
			if m.Known != "" && !*modelAll {
				t.Skip(m.Known + " (-model.all runs it)")
			}
			modelcheck.RunScript(t, m.Script().Plan(), redisServers, newModelClient)
		})
	}
}
