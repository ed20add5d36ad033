package fleet_test

import (
	"testing"

	"github.com/redshard/redshard/internal/blackhole"
)

// Issue 26's additions to TestFleetTorture: member ids that a fence by
// name confused or that Redis refuses in a connection name, and commands
// with short deadlines through Client.AutoPipeline() and FullDuplex.

// shortDeadline is the deadline of every command of the identity workers:
// far below any HoldTimeout, so a command held in Prepare must be refused
// by its own deadline.
const shortDeadline = "300ms"

// identityWorkerIDs are the ids of the identity workers: a space, a
// non-ASCII byte, and one connection name for both under the mapping of
// bytes <= ' ' to '_' that names once used.
var identityWorkerIDs = []string{"w 1é", "w_1é"}

// identityWorkers adds the identity workers to the fleet, each behind a
// blackhole proxy of its own to the registry like the others: "w 1é"
// sends through Client.AutoPipeline(), "w_1é" through its full-duplex
// per-shard pipeliners (Options.AutoPipeline). The faults pick among them
// as among the others: one paused is dropped while its look-alike is live,
// and the others' Prepare is held while it is paused.
func (r *tortureRun) identityWorkers(regAddr, path string) {
	extra := [][]string{{"--front-autopipeline"}, {"--autopipeline", "fullduplex"}}
	for i, id := range identityWorkerIDs {
		px, err := blackhole.Listen(regAddr)
		if err != nil {
			r.t.Fatal(err)
		}
		r.t.Cleanup(func() { _ = px.Close() })
		r.proxies[id] = px
		args := append([]string{"--registry", r.kind + "://" + px.Addr() + path, "--deadline", shortDeadline}, extra[i]...)
		r.worker(id, args...)
	}
}

// checkIdentityWorker checks the totals of a worker that stopped: an
// identity worker had operations succeed, and its held commands were all
// refused by their own deadline, none when HoldTimeout ran out.
func checkIdentityWorker(t *testing.T, id string, tot map[string]any) {
	t.Helper()
	for _, w := range identityWorkerIDs {
		if w != id {
			continue
		}
		if n, _ := tot["HeldAtHoldTimeout"].(float64); n != 0 {
			t.Errorf("worker %q (deadline %s): %v held commands waited for HoldTimeout, past their own deadline", id, shortDeadline, n)
		}
		ops, _ := tot["Ops"].(float64)
		errs, _ := tot["Errors"].(float64)
		if ops == errs {
			t.Errorf("worker %q: %v operations, all failed (a connection name Redis refuses fails every command)", id, ops)
		}
	}
}
