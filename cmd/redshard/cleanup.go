package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
)

// A bench on real servers writes its workload's keys and must delete them
// however the run ends. Three ways used to skip the deferred cleanup:
// SIGTERM and SIGHUP killed the process, and so did SIGPIPE when the
// reader of its output went away (redshard bench ... | head -30), which
// left 100,000 keys behind. SIGINT was already a cancellation
// (runContext). guardRun makes the others cancellations too, and
// benchCleanup deletes the keys and, when the run was interrupted or the
// keys stay, says so and how to remove them.

// guardRun returns ctx cancelled also on SIGTERM or SIGHUP, or when a
// write to stdout or stderr fails because its reader went away (EPIPE),
// and stdout and stderr wrapped to notice that. While it is in force a
// broken pipe is an error from Write, not a signal that kills the process:
// signal.Notify for SIGPIPE makes the runtime deliver it to a channel
// instead (see os/signal, "SIGPIPE"). Broken connections to servers raise
// SIGPIPE too; those alone do not cancel. stop undoes it all; call it
// once, after the cleanup.
func guardRun(ctx context.Context, stdout, stderr io.Writer) (_ context.Context, out, errOut io.Writer, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case s := <-sigs:
				if s != syscall.SIGPIPE {
					cancel(fmt.Errorf("%w: %v", errInterrupted, s))
				}
			case <-done:
				return
			}
		}
	})
	onPipe := func() { cancel(fmt.Errorf("%w: the output's reader went away (broken pipe)", errInterrupted)) }
	stop = func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
		cancel(nil)
	}
	return ctx, &pipeWatch{w: stdout, broken: onPipe}, &pipeWatch{w: stderr, broken: onPipe}, stop
}

// errInterrupted is the cause of a run's context when guardRun cancels it.
var errInterrupted = errors.New("interrupted")

// pipeWatch is a Writer that calls broken when a write fails with EPIPE.
type pipeWatch struct {
	w      io.Writer
	broken func()
}

func (p *pipeWatch) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.broken()
	}
	return n, err
}

// benchCleanup is the end of a bench on real servers: it deletes the
// workload's keys (unless --cleanup=false), and says what stays, and how
// to delete it, when the run was interrupted or the deletion failed.
type benchCleanup struct {
	fl       *fleet
	keys     []string
	internal bool   // also redshard's records of the keys (split copies, settled sets)
	delete   bool   // --cleanup
	prefix   string // --prefix
}

// run deletes the keys, whatever ctx's state (its values are kept, its
// cancellation is not), and reports on stderr.
func (bc *benchCleanup) run(ctx context.Context, stderr io.Writer) {
	interrupted := ctx.Err() != nil
	if interrupted {
		what := "interrupted"
		if cause := context.Cause(ctx); cause != nil {
			what = cause.Error()
		}
		if bc.delete {
			fmt.Fprintf(stderr, "bench: %s: deleting the workload's %d keys...\n", what, len(bc.keys))
		} else {
			fmt.Fprintf(stderr, "bench: %s\n", what)
		}
	}
	if !bc.delete {
		if interrupted {
			bc.left(stderr, "--cleanup=false: the workload's keys stay")
		}
		return
	}
	if err := bc.fl.deleteKeys(context.WithoutCancel(ctx), bc.keys, bc.internal); err != nil {
		fmt.Fprintf(stderr, "bench: cleanup: %v\n", err)
		bc.left(stderr, "some of the workload's keys may stay")
		return
	}
	if interrupted {
		fmt.Fprintf(stderr, "bench: deleted the workload's %d keys; nothing is left\n", len(bc.keys))
	}
}

// left says which keys may stay on which servers, and how to delete them.
func (bc *benchCleanup) left(w io.Writer, why string) {
	pattern := globEscape(bc.prefix) + "key:*"
	extra := ""
	if k := bc.keys[0]; !strings.HasSuffix(k, "key:0") { // the celebrity workload's key 0
		extra = " and " + k
	}
	fmt.Fprintf(w, "bench: %s: %s%s (%d keys in all) on each server; delete them with:\n", why, pattern, extra, len(bc.keys))
	for _, s := range append(bc.fl.shards(), bc.fl.extra...) {
		host, port, err := net.SplitHostPort(s.Addr)
		if err != nil {
			fmt.Fprintf(w, "  (shard %s: %v)\n", s.Name, err)
			continue
		}
		cli := fmt.Sprintf("redis-cli -h %s -p %s", host, port)
		fmt.Fprintf(w, "  %s --scan --pattern '%s' | xargs -r -n 1000 %s unlink", cli, pattern, cli)
		if extra != "" {
			fmt.Fprintf(w, "; %s unlink '%s'", cli, bc.keys[0])
		}
		fmt.Fprintln(w)
	}
}
