// Command redshard is the operator's tool for a redshard fleet: it shows how
// a shard list divides the key space, plans a membership change, moves the
// keys after one, drives a fleet's change through its registry, watches hot
// keys, and generates load.
//
//	redshard shares    --config fleet.json
//	redshard plan      --config fleet.json --add cache-d=10.0.0.4:6379:2
//	redshard rebalance --config fleet.json --add cache-d=10.0.0.4:6379:2 --yes
//	redshard apply     --registry redis://10.0.0.9:6379/redshard:registry:web --config fleet.json
//	redshard status    --registry redis://10.0.0.9:6379/redshard:registry:web
//	redshard hotkeys   --workload celebrity
//	redshard bench     --workload zipf --duration 10s --compare goredis-ring
//
// Every subcommand has --help. The shard list comes from a JSON file
// (--config, format in docs/operations.md and redshard.LoadConfig) or from
// repeated --shard name=host:port[:weight] flags; hotkeys and bench start
// embedded miniredis shards when given neither. apply and status work on a
// fleet's registry (--registry redis://host:port/NAME or
// etcd://host:port/PREFIX).
//
// Exit status: 0 on success, 1 when the work failed (a server, a bad
// configuration file, keys that could not be moved, a panic), 2 for a
// usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// subcommand is one verb of the tool.
type subcommand struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// subcommands are listed in this order by the top-level usage.
var subcommands []subcommand

func init() {
	subcommands = []subcommand{
		{"shares", "each shard's share of the key space against its weight (no server needed)", runShares},
		{"plan", "what a membership change would move, against hash mod N (no server needed)", runPlan},
		{"rebalance", "change the shard list and move the keys that changed owner (needs --yes)", runRebalance},
		{"apply", "change a fleet's ring through its registry, phase by phase, with a live display", runApply},
		{"status", "a fleet registry's config and phase, and every live process", runStatus},
		{"hotkeys", "run a workload and show the hottest keys, refreshed periodically", runHotkeys},
		{"bench", "load generator: throughput, latency, per-shard load, hit rate", runBench},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args (without the program name) and
// returns the exit status. Tests call it directly.
//
// A panic is a bug, not a usage error: run recovers it, prints it with its
// stack on stderr and returns exitFail (an unrecovered panic would exit 2,
// the status of a usage error).
func run(args []string, stdout, stderr io.Writer) (code int) {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run under ctx: a subcommand stops when ctx is done, as on
// Ctrl-C.
func runContext(parent context.Context, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "redshard: internal error: panic: %v\n\n%s", r, debug.Stack())
			code = exitFail
		}
	}()
	if len(args) == 0 {
		topUsage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 {
			// "redshard help plan" is "redshard plan --help".
			return runContext(parent, []string{args[1], "--help"}, stdout, stderr)
		}
		topUsage(stdout)
		return exitOK
	}
	for _, sc := range subcommands {
		if sc.name != name {
			continue
		}
		ctx, stop := signal.NotifyContext(parent, os.Interrupt)
		defer stop()
		// go-redis's logger writes to stderr from its own goroutines.
		stderr := &lockedWriter{w: stderr}
		redisLog.start(stderr)
		defer redisLog.stop(name) // before a panic is printed, too
		err := sc.run(ctx, args[1:], stdout, stderr)
		var ue usageError
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return exitOK
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "redshard %s: %v\nRun 'redshard %s --help' for usage.\n", name, ue.err, name)
			return exitUsage
		case errors.Is(err, errReported):
			return exitFail
		default:
			fmt.Fprintf(stderr, "redshard %s: %v\n", name, err)
			return exitFail
		}
	}
	fmt.Fprintf(stderr, "redshard: unknown command %q\n\n", name)
	topUsage(stderr)
	return exitUsage
}

func topUsage(w io.Writer) {
	fmt.Fprint(w, `redshard is the operator's tool for a redshard fleet.

Usage:
  redshard <command> [flags]

Commands:
`)
	for _, sc := range subcommands {
		fmt.Fprintf(w, "  %-10s %s\n", sc.name, sc.summary)
	}
	fmt.Fprint(w, `
The shard list comes from --config FILE (JSON; see docs/operations.md) or
from repeated --shard name=host:port[:weight] flags. apply and status work
on a fleet's registry: --registry redis://host:port/NAME or
etcd://host:port/PREFIX.

Run 'redshard <command> --help' for a command's flags. Every command takes
--verbose to print go-redis's own log lines (failed dials, ...), which are
otherwise counted and summarised at the end.
Exit status: 0 success, 1 failure (a panic included), 2 usage error.
`)
}

// lockedWriter serializes the writes to w. It is safe for concurrent use.
type lockedWriter struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// usageError is an error in the command line: the exit status is 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usageError.
func usagef(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

// errReported means the subcommand has already told the user what went
// wrong; run only sets the exit status.
var errReported = errors.New("reported")

// flags is a subcommand's FlagSet with its help text.
type flags struct {
	*flag.FlagSet
	synopsis, description string
	verbose               *bool
}

// newFlags returns the flags of a subcommand whose usage is synopsis and
// description followed by the flags' defaults. Every subcommand has
// --verbose.
func newFlags(name, synopsis, description string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse reports errors itself
	fs.Usage = func() {}
	f := &flags{FlagSet: fs, synopsis: synopsis, description: description}
	f.verbose = fs.Bool("verbose", false, "print go-redis's own log lines (failed dials, ...) on stderr; without it they are only counted")
	return f
}

// parse parses args. --help prints the usage to stdout and returns
// flag.ErrHelp; a bad flag returns a usageError. Positional arguments are
// refused: every subcommand takes flags only.
func (f *flags) parse(args []string, stdout io.Writer) error {
	err := f.Parse(args)
	redisLog.setVerbose(*f.verbose)
	switch {
	case errors.Is(err, flag.ErrHelp):
		f.usage(stdout)
		return flag.ErrHelp
	case err != nil:
		return usageError{err}
	case f.NArg() > 0:
		return usagef("unexpected argument %q (every option is a flag)", f.Arg(0))
	}
	return nil
}

func (f *flags) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage:\n  redshard %s %s\n\n%s\n\nFlags:\n", f.Name(), f.synopsis, strings.TrimSpace(f.description))
	f.SetOutput(w)
	f.PrintDefaults()
	f.SetOutput(io.Discard)
}

// isSet reports whether the flag called name was given on the command line.
func (f *flags) isSet(name string) bool {
	set := false
	f.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}
