package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/redistest"
)

// TestBenchCleanupAfterSignal: a bench on a real server deletes its keys
// however it is stopped: its output's reader going away (SIGPIPE: the
// pipe of redshard bench ... | head -30 closed), SIGINT or SIGTERM. The
// command runs as a process of its own (this test binary as redshard),
// against a private redis-server, and afterwards no key of its prefix is
// left. SIGPIPE and SIGTERM used to kill it before its cleanup.
func TestBenchCleanupAfterSignal(t *testing.T) {
	srv := redistest.Start(t)
	cfg := writeFile(t, "fleet.json", fmt.Sprintf(`{"shards": [{"name": "a", "addr": %q}], "health": {"disable": true}}`, srv.Addr()))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	const keys = 20000
	for _, tc := range []struct {
		name string
		sig  syscall.Signal // 0: close the reader of stdout instead
	}{
		{"SIGPIPE", 0},
		{"SIGINT", syscall.SIGINT},
		{"SIGTERM", syscall.SIGTERM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			prefix := "cleanuptest:" + tc.name + ":"
			duration := "10m" // ended by the signal
			if tc.sig == 0 {
				duration = "200ms" // the results, written at the end, meet the closed pipe
			}
			cmd := exec.CommandContext(ctx, os.Args[0], "bench", "--config", cfg, "--prefix", prefix,
				"--keys", fmt.Sprint(keys), "--concurrency", "4", "--duration", duration)
			cmd.Env = append(os.Environ(), mainEnv+"=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			var stdout bytes.Buffer
			var pr, pw *os.File
			if tc.sig == 0 {
				var err error
				if pr, pw, err = os.Pipe(); err != nil {
					t.Fatal(err)
				}
				cmd.Stdout = pw
			} else {
				cmd.Stdout = &stdout
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tc.sig == 0 {
				// Nobody reads: the first write to stdout fails.
				pw.Close()
				pr.Close()
			} else {
				// Signal once the keys are being written.
				for {
					n, err := rdb.Exists(ctx, prefix+"key:"+fmt.Sprint(keys-1)).Result()
					if err != nil {
						t.Fatalf("waiting for the bench's keys: %v (stderr %s)", err, stderr.String())
					}
					if n == 1 {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				if err := cmd.Process.Signal(tc.sig); err != nil {
					t.Fatal(err)
				}
			}
			err := cmd.Wait()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				t.Errorf("bench was killed by %v: its cleanup did not run (stderr:\n%s)", ws.Signal(), stderr.String())
			}
			if err == nil {
				t.Errorf("bench exited 0 after %s; want the interruption reported (stderr:\n%s)", tc.name, stderr.String())
			}
			var left []string
			it := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for it.Next(ctx) {
				left = append(left, it.Val())
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			if len(left) > 0 {
				t.Errorf("after %s, %d of the bench's keys are left (%q, ...); stderr:\n%s", tc.name, len(left), left[0], stderr.String())
			}
			if !strings.Contains(stderr.String(), fmt.Sprintf("deleted the workload's %d keys; nothing is left", keys)) {
				t.Errorf("stderr does not say the keys were deleted:\n%s", stderr.String())
			}
			t.Logf("stderr:\n%s", stderr.String())
			if len(left) > 0 {
				rdb.Unlink(context.Background(), left...) // only the keys of our own prefix
			}
		})
	}
}

// TestBenchCleanupSaysWhatIsLeft: an interrupted run that keeps its keys
// (--cleanup=false) names them and each server's command to delete them.
func TestBenchCleanupSaysWhatIsLeft(t *testing.T) {
	fl := &fleet{opt: &redshard.Options{Shards: []redshard.Shard{{Name: "a", Addr: "10.0.0.1:6379"}, {Name: "b", Addr: "10.0.0.2:6380"}}}}
	wl := workload{keys: 500, prefix: "b[1]:", kind: "celebrity"}
	bc := &benchCleanup{fl: fl, keys: wl.keyNames(), prefix: wl.prefix}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	bc.run(ctx, &out)
	for _, want := range []string{
		`--cleanup=false: the workload's keys stay: b\[1\]:key:* and b[1]:celebrity (500 keys in all)`,
		`redis-cli -h 10.0.0.1 -p 6379 --scan --pattern 'b\[1\]:key:*' | xargs -r -n 1000 redis-cli -h 10.0.0.1 -p 6379 unlink; redis-cli -h 10.0.0.1 -p 6379 unlink 'b[1]:celebrity'`,
		`redis-cli -h 10.0.0.2 -p 6380 --scan`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output does not say %q:\n%s", want, out.String())
		}
	}
}
