package integration_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/redistest"
)

// A shard's pooled connection that just carried a reply is not checked
// again before the next command (one system call fewer per command), so
// a connection the server closed in between is found by the command
// itself. These tests kill the client's connections right after a reply
// and check that every command still runs exactly once, on a new
// connection, whether the gate skips the check (retries on) or not
// (MaxRetries -1: go-redis's own check must catch the close, since
// nothing would run the command again).
func TestServerClosedPooledConnection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries int
		ap      bool
	}{{"retries", 0, false}, {"no retries", -1, false}, {"auto-pipelined", 0, true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			admin := srv.Client(t)
			c, err := redshard.NewClient(&redshard.Options{
				Shards:       []redshard.Shard{{Name: "a", Addr: srv.Addr(), Weight: 1}},
				ShardOptions: &redis.Options{PoolSize: 1, MaxRetries: tc.retries},
				// No heartbeat tick during the test: a connection that
				// answered stays unchecked for the whole test.
				Health:       &redshard.HealthOptions{Interval: time.Hour},
				AutoPipeline: tc.ap,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			if err := c.Set(ctx, "n", 0, 0).Err(); err != nil {
				t.Fatal(err)
			}
			dials := connectionsReceived(t, admin)

			kill := func() {
				t.Helper()
				// SKIPME yes (the default) spares the admin's own connection.
				n, err := admin.ClientKillByFilter(ctx, "TYPE", "normal").Result()
				if err != nil || n < 1 {
					t.Fatalf("CLIENT KILL: %d killed, %v", n, err)
				}
			}
			want := 0
			kill()
			if got, err := c.Incr(ctx, "n").Result(); err != nil || got != int64(want+1) {
				t.Fatalf("INCR after the kill: %d, %v; want %d", got, err, want+1)
			}
			want++

			kill()
			var get *redis.StringCmd
			var incr *redis.IntCmd
			if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				get = p.Get(ctx, "n")
				incr = p.Incr(ctx, "n")
				return nil
			}); err != nil {
				t.Fatalf("pipeline after the kill: %v", err)
			}
			if get.Val() != strconv.Itoa(want) || incr.Val() != int64(want+1) {
				t.Fatalf("pipeline after the kill: GET %q, INCR %d; want %d, %d", get.Val(), incr.Val(), want, want+1)
			}
			want++

			kill()
			var txIncr *redis.IntCmd
			if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				txIncr = p.Incr(ctx, "n")
				return nil
			}); err != nil || txIncr.Val() != int64(want+1) {
				t.Fatalf("transaction after the kill: INCR %d, %v; want %d", txIncr.Val(), err, want+1)
			}
			want++

			kill()
			if err := c.Watch(ctx, func(tx *redis.Tx) error {
				_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Incr(ctx, "n")
					return nil
				})
				return err
			}, "n"); err != nil {
				t.Fatalf("Watch after the kill: %v", err)
			}
			want++

			kill()
			conn := c.Conn()
			if err := conn.Incr(ctx, "n").Err(); err != nil {
				t.Fatalf("Conn after the kill: %v", err)
			}
			conn.Close()
			want++

			kill()
			if err := c.LPush(ctx, "l", "x").Err(); err != nil {
				t.Fatalf("LPUSH after the kill: %v", err)
			}
			kill()
			if v, err := c.BLPop(ctx, time.Second, "l").Result(); err != nil || v[1] != "x" {
				t.Fatalf("BLPOP after the kill: %q, %v", v, err)
			}

			if got, err := admin.Get(ctx, "n").Result(); err != nil || got != strconv.Itoa(want) {
				t.Fatalf("the server holds %q, %v; want %d (each command ran once)", got, err, want)
			}
			// Each command after a kill went out on a new connection.
			if d := connectionsReceived(t, admin) - dials; d < 7 {
				t.Fatalf("%d connections dialed after the kills, want at least 7", d)
			}
		})
	}
}

// connectionsReceived is the server's total_connections_received.
func connectionsReceived(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_connections_received:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("INFO stats has no total_connections_received")
	return 0
}

// A server restart closes every pooled connection at once: with one
// retry, the command's second attempt must not take another dead
// connection unchecked.
func TestServerRestartEveryPooledConnection(t *testing.T) {
	srv := redistest.Start(t)
	c, err := redshard.NewClient(&redshard.Options{
		Shards:       []redshard.Shard{{Name: "a", Addr: srv.Addr(), Weight: 1}},
		ShardOptions: &redis.Options{PoolSize: 8, MaxRetries: 1},
		Health:       &redshard.HealthOptions{Interval: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	// Fill the pool: eight commands at once, each holding a connection
	// (BLPOP on empty lists, released by the LPUSHes).
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if err := c.BLPop(ctx, 5*time.Second, "wake"+strconv.Itoa(i)).Err(); err != nil {
				t.Errorf("BLPOP: %v", err)
			}
		})
	}
	admin := srv.Client(t)
	for i := range 8 {
		for {
			n, err := admin.Do(ctx, "CLIENT", "LIST").Text()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Count(n, "cmd=blpop") == 8 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if err := admin.LPush(ctx, "wake"+strconv.Itoa(i), "x").Err(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if n := c.PoolStats().IdleConns; n < 8 {
		t.Fatalf("%d idle connections, want 8", n)
	}
	if n, err := admin.ClientKillByFilter(ctx, "TYPE", "normal").Result(); err != nil || n < 8 {
		t.Fatalf("CLIENT KILL: %d killed, %v", n, err)
	}
	for i := range 8 {
		if err := c.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatalf("SET %d after the kill: %v", i, err)
		}
	}
}
