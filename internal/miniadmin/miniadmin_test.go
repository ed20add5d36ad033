package miniadmin_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redshard/redshard/internal/miniadmin"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// conn returns one dedicated connection to m, named name.
func conn(t *testing.T, m *miniredis.Miniredis, name string) *redis.Conn {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	cn := rdb.Conn()
	t.Cleanup(func() { _ = cn.Close() })
	if err := cn.ClientSetName(context.Background(), name).Err(); err != nil {
		t.Fatalf("CLIENT SETNAME: %v", err)
	}
	return cn
}

func TestClientCommands(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	a := miniadmin.Install(m)
	one, two := conn(t, m, "one"), conn(t, m, "two")
	id1, err := one.ClientID(ctx).Result()
	if err != nil {
		t.Fatalf("CLIENT ID: %v", err)
	}
	id2, _ := two.ClientID(ctx).Result()
	if id1 <= 0 || id2 <= 0 || id1 == id2 {
		t.Fatalf("CLIENT ID: %d and %d, want two distinct positive ids", id1, id2)
	}
	list, err := one.ClientList(ctx).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST: %v", err)
	}
	for _, want := range []string{fmt.Sprintf("id=%d addr=miniredis name=one\n", id1), fmt.Sprintf("id=%d addr=miniredis name=two\n", id2)} {
		if !strings.Contains(list, want) {
			t.Errorf("CLIENT LIST = %q, has no %q", list, want)
		}
	}
	only, err := one.Do(ctx, "client", "list", "id", id2, id2+100).Text()
	if err != nil || only != fmt.Sprintf("id=%d addr=miniredis name=two\n", id2) {
		t.Errorf("CLIENT LIST ID %d %d = %q, %v; want only the second connection", id2, id2+100, only, err)
	}
	if err := one.Do(ctx, "client", "list", "type", "normal").Err(); err == nil {
		t.Error("CLIENT LIST TYPE: no error, want a refusal (not supported)")
	}

	if err := one.ClientKillByFilter(ctx, "ID", fmt.Sprint(id2)).Err(); err != nil {
		t.Fatalf("CLIENT KILL ID: %v", err)
	}
	if err := two.Set(ctx, "k", "v", 0).Err(); err == nil {
		t.Error("a killed connection's next command succeeded")
	}
	if m.Exists("k") {
		t.Error("a killed connection's next command was executed")
	}
	if err := one.ClientKillByFilter(ctx, "ID", fmt.Sprint(id2)).Err(); err == nil {
		t.Error("CLIENT KILL ID of a killed connection: no error, want No such client")
	}
	if n := a.Killed(); n != 1 {
		t.Errorf("Killed() = %d, want 1", n)
	}
}

// TestAttachAfterRestart: miniredis forgets its pre-hook when it restarts;
// Attach puts the same Admin back, and ids keep growing.
func TestAttachAfterRestart(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	a := miniadmin.Install(m)
	before, err := conn(t, m, "before").ClientID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	after := conn(t, m, "after")
	if err := after.ClientList(ctx).Err(); err == nil {
		t.Fatal("CLIENT LIST answered after a restart without Attach: the test shows nothing")
	}
	a.Attach(m)
	id, err := after.ClientID(ctx).Result()
	if err != nil || id <= before {
		t.Fatalf("CLIENT ID after Attach: %d, %v; want more than %d", id, err, before)
	}
	if list, err := after.ClientList(ctx).Result(); err != nil || strings.Contains(list, "name=before") {
		t.Errorf("CLIENT LIST after a restart: %q, %v; want no connection from before", list, err)
	}
}

func TestSetError(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	a := miniadmin.Install(m)
	cn := conn(t, m, "c")
	a.SetError("LOADING Redis is loading the dataset in memory")
	for _, cmd := range [][]any{{"get", "k"}, {"client", "list"}} {
		if err := cn.Do(ctx, cmd...).Err(); err == nil || !strings.HasPrefix(err.Error(), "LOADING") {
			t.Errorf("%v under SetError: %v, want the LOADING error", cmd, err)
		}
	}
	a.SetError("")
	if err := cn.ClientList(ctx).Err(); err != nil {
		t.Errorf("CLIENT LIST after SetError(\"\"): %v", err)
	}
}
