package redshard_test

import (
	"flag"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"

	"github.com/redshard/redshard/internal/modelcheck"
)

// TestModel is the model-based test of membership changes (package
// internal/modelcheck) on miniredis shards: seeded random histories of
// commands, SetShards, Rebalance, faults and commands held in flight,
// checked per key for linearizability with porcupine and, at the end, for
// every key living once on its owner.
//
//	go test . -race -run TestModel                                   # the default seeds
//	go test . -race -run 'TestModel/rename$' -model.all              # a scenario known to fail
//	go test . -race -run 'TestModel/held$' -model.seed 87 -model.ops 30 -v  # replay one seed
//	go test . -race -run TestModel -model.all -model.seeds 1000 -model.ops 400
//
// (The package comes before the -model flags: go test hands everything
// after an unknown flag to the test binary.)
//
// A seed fixes the operations, values, membership events, holds and
// releases; the goroutine interleaving between the points the scheduler
// orders with channels is not deterministic, so a replayed seed runs the
// same sequence but may interleave differently (see package modelcheck).
var (
	modelSeed  = flag.Uint64("model.seed", 0, "run only this seed (0: seeds 1..-model.seeds)")
	modelSeeds = flag.Int("model.seeds", 0, "seeds per scenario (default 12, 4 with -short)")
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
				Scenario: sc, Seeds: modelSeedList(12, 4), Ops: *modelOps,
				Servers: miniServers, Printed: *modelPrint, Verbose: *modelSeed != 0 && testing.Verbose(),
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

// miniServers starts n miniredis servers. Down closes one (its data stays,
// connections are refused), Up restarts it on the same port.
func miniServers(t *testing.T, n int) []modelcheck.Server {
	out := make([]modelcheck.Server, n)
	for i := range out {
		m := miniredis.RunT(t)
		out[i] = modelcheck.Server{Addr: m.Addr(), Down: m.Close, Up: func() {
			if err := m.Restart(); err != nil {
				t.Errorf("restarting miniredis %s: %v", m.Addr(), err)
			}
		}}
	}
	return out
}

// TestModelAutoPipeline runs the model's scenarios with Options.AutoPipeline,
// go-redis's default AutoPipeliner and the full-duplex one per shard: a
// membership change, a fault and a held command in flight while commands
// ride a shard's batches or stream. (A hold is a shard hook: under
// FullDuplex it runs after the command's write is queued, so it holds the
// command's answer, not its sending.)
func TestModelAutoPipeline(t *testing.T) {
	modes := []struct {
		name       string
		fullDuplex bool
	}{{"default", false}, {"fullduplex", true}}
	for _, mode := range modes {
		newClient := func(shards []redshard.Shard) (*redshard.Client, error) {
			ap := redis.DefaultBlockingAutoPipelineOptions()
			ap.FullDuplex = mode.fullDuplex
			return redshard.NewClient(&redshard.Options{
				Shards:              shards,
				Health:              &redshard.HealthOptions{Disable: true},
				AutoPipeline:        true,
				AutoPipelineOptions: ap,
				ShardOptions: &redis.Options{MaxRetries: -1, DialerRetries: 1, PoolSize: 1000, DialTimeout: time.Second,
					ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second},
			})
		}
		for _, sc := range modelcheck.Scenarios {
			if sc.Known != "" {
				continue
			}
			switch sc.Name {
			case "restarts", "held", "two-clients", "add-remove":
			default:
				continue
			}
			t.Run(mode.name+"/"+sc.Name, func(t *testing.T) {
				modelcheck.RunSeeds(t, modelcheck.SeedOptions{
					Scenario: sc, Seeds: modelSeedList(3, 2), Ops: *modelOps,
					Servers: miniServers, NewClient: newClient, Printed: *modelPrint,
				})
			})
		}
	}
}
