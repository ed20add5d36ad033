package keymove_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/keymove"
	"github.com/redshard/redshard/internal/redistest"
)

const (
	settled = "redshard:settled:test"
	index   = "redshard:index"
)

// servers starts a previous owner P and a new owner N.
func servers(t *testing.T) (p, n *redis.Client) {
	t.Helper()
	return redistest.Start(t).Client(t), redistest.Start(t).Client(t)
}

func to(n *redis.Client) func(string) *redis.Client { return func(string) *redis.Client { return n } }

// TestMove: each outcome of the protocol, one key each, in one batch: a
// key moves with its TTL and its settled set is indexed; an absent key is
// absent; a key N already has keeps N's (newer) value and leaves P; a key
// the change has settled already is refused on N and released on P.
func TestMove(t *testing.T) {
	ctx := context.Background()
	p, n := servers(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.Set(ctx, "moves", "v1", time.Hour).Err())
	must(p.Set(ctx, "newer-on-n", "old", 0).Err())
	must(n.Set(ctx, "newer-on-n", "new", 0).Err())
	must(p.Set(ctx, "settled-before", "stale", 0).Err())
	must(n.HSet(ctx, settled, "settled-before", "1").Err())

	keys := []string{"moves", "absent", "newer-on-n", "settled-before"}
	res, err := keymove.Move(ctx, p, keys, settled, index, to(n))
	if err != nil {
		t.Fatal(err)
	}
	want := []keymove.Result{
		{Moved: true, Bytes: res[0].Bytes},
		{Absent: true},
		{Moved: true, Bytes: res[2].Bytes},
		{Settled: true},
	}
	for i, k := range keys {
		if res[i] != want[i] {
			t.Errorf("%s: %+v, want %+v", k, res[i], want[i])
		}
	}
	if res[0].Bytes == 0 {
		t.Errorf("moves: Bytes = 0, want the DUMP's size")
	}
	if n := p.Exists(ctx, keys...).Val(); n != 0 {
		t.Errorf("P still has %d of the keys", n)
	}
	for k, v := range map[string]string{"moves": "v1", "newer-on-n": "new"} {
		if got, err := n.Get(ctx, k).Result(); err != nil || got != v {
			t.Errorf("N's %s = %q, %v; want %q", k, got, err, v)
		}
	}
	if ttl := n.TTL(ctx, "moves").Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("moved key's TTL on N = %v, want (0, 1h]", ttl)
	}
	if n.Exists(ctx, "settled-before").Val() != 0 {
		t.Errorf("a key settled before came back on N")
	}
	if ok, err := n.SIsMember(ctx, index, settled).Result(); err != nil || !ok {
		t.Errorf("settled set in index: %v, %v", ok, err)
	}
	if ttl := n.TTL(ctx, settled).Val(); ttl <= 0 || ttl > keymove.SettledTTL {
		t.Errorf("settled set TTL = %v, want (0, SettledTTL]", ttl)
	}
}

// TestMoveKeepsAWriteToTheOldOwner: a write that reaches P between the
// take and the release is kept on P, and the key is reported failed.
func TestMoveKeepsAWriteToTheOldOwner(t *testing.T) {
	ctx := context.Background()
	p, n := servers(t)
	writer := redis.NewClient(&redis.Options{Addr: p.Options().Addr})
	t.Cleanup(func() { _ = writer.Close() })
	if err := p.Set(ctx, "k", "taken", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var wrote atomic.Bool
	p.AddHook(afterPipeline(func(cmds []redis.Cmder) {
		// After the take (the first pipeline to succeed on P: one that met
		// NOSCRIPT is sent again by EVAL), the write lands before the release.
		if cmds[0].Err() == nil && wrote.CompareAndSwap(false, true) {
			if err := writer.Set(ctx, "k", "written meanwhile", 0).Err(); err != nil {
				t.Error(err)
			}
		}
	}))
	res, err := keymove.Move(ctx, p, []string{"k"}, settled, index, to(n))
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil || res[0].Moved {
		t.Fatalf("result %+v, want an error and not Moved", res[0])
	}
	if !wrote.Load() {
		t.Fatal("the hook never wrote")
	}
	if got := p.Get(ctx, "k").Val(); got != "written meanwhile" {
		t.Errorf("P's k = %q, want the write kept", got)
	}
}

// TestSettleAbsent: a key settled without a value is refused by a later
// move in the same change, which releases P's stale copy.
func TestSettleAbsent(t *testing.T) {
	ctx := context.Background()
	p, n := servers(t)
	if err := keymove.SettleAbsent(ctx, n, "k", settled, index); err != nil {
		t.Fatal(err)
	}
	if err := p.Set(ctx, "k", "stale", 0).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := keymove.Move(ctx, p, []string{"k"}, settled, index, to(n))
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Settled || res[0].Err != nil {
		t.Fatalf("result %+v, want Settled", res[0])
	}
	if n.Exists(ctx, "k").Val() != 0 || p.Exists(ctx, "k").Val() != 0 {
		t.Errorf("the stale copy survived: on N %d, on P %d", n.Exists(ctx, "k").Val(), p.Exists(ctx, "k").Val())
	}
}

// TestMoveUnreachable: a previous owner that does not answer fails the
// batch as a whole.
func TestMoveUnreachable(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	addr := s.Addr()
	s.Stop()
	p := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = p.Close() })
	res, err := keymove.Move(ctx, p, []string{"k"}, settled, index, to(p))
	if err == nil || res != nil {
		t.Fatalf("Move on a stopped server = %v, %v; want an error and no results", res, err)
	}
}

// afterPipeline calls fn after each pipeline the client sends.
type afterPipeline func([]redis.Cmder)

func (afterPipeline) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (afterPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (f afterPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		f(cmds)
		return err
	}
}
