package redshard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/registry"
	"github.com/redshard/redshard/ring"
)

func TestRingRecipeOption(t *testing.T) {
	shards := []redshard.Shard{{Name: "a", Addr: "127.0.0.1:1"}, {Name: "b", Addr: "127.0.0.1:2"}, {Name: "c", Addr: "127.0.0.1:3", Weight: 2}}
	for _, recipe := range []int{0, ring.Recipe1, ring.Recipe2} {
		c, err := redshard.NewClient(&redshard.Options{Shards: shards, RingRecipe: recipe, Health: &redshard.HealthOptions{Disable: true}})
		if err != nil {
			t.Fatalf("recipe %d: %v", recipe, err)
		}
		want := recipe
		if want == 0 {
			want = ring.Recipe1
		}
		if got := c.Ring().Recipe(); got != want {
			t.Errorf("RingRecipe %d: the client's ring has recipe %d", recipe, got)
		}
		r, err := ring.New([]ring.Node{{Name: "a"}, {Name: "b"}, {Name: "c", Weight: 2}}, &ring.Config{Recipe: recipe})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 1000 {
			k := fmt.Sprintf("key:%d", i)
			if got, _ := c.ShardFor(k); got != r.Lookup(k) {
				t.Fatalf("RingRecipe %d: %s is on %s, the ring package says %s", recipe, k, got, r.Lookup(k))
			}
		}
		_ = c.Close()
	}
	for _, bad := range []int{-1, 3, 100} {
		_, err := redshard.NewClient(&redshard.Options{Shards: shards, RingRecipe: bad})
		if !errors.Is(err, redshard.ErrInvalidOptions) || !strings.Contains(err.Error(), "RingRecipe") {
			t.Errorf("RingRecipe %d: %v, want ErrInvalidOptions naming RingRecipe", bad, err)
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	reg := registry.NewRedis(rdb, "redshard:registry:recipe")
	defer reg.Close()
	err := (&redshard.Options{Registry: reg, RingRecipe: ring.Recipe2}).Validate()
	if !errors.Is(err, redshard.ErrInvalidOptions) || !strings.Contains(err.Error(), "ring_recipe") {
		t.Errorf("RingRecipe with Registry: %v, want ErrInvalidOptions pointing to the document's ring_recipe", err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		recipe string
		want   int
		err    string
	}{{"2", 2, ""}, {"1", 1, ""}, {"0", 0, ""}, {"3", 0, "ring_recipe"}, {`"2"`, 0, "ring_recipe"}} {
		p := filepath.Join(dir, "c.json")
		doc := `{"shards": [{"name": "a", "addr": "127.0.0.1:1"}], "ring_recipe": ` + tc.recipe + `}`
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		opt, err := redshard.LoadConfig(p)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ring_recipe %s: %v, want an error naming %s", tc.recipe, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("ring_recipe %s: %v", tc.recipe, err)
		case tc.err == "" && opt.RingRecipe != tc.want:
			t.Errorf("ring_recipe %s: RingRecipe %d", tc.recipe, opt.RingRecipe)
		}
	}
}

// recipeDoc is f.doc(n) naming a placement recipe (0: none).
func recipeDoc(t *testing.T, f *testFleet, n, recipe int) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(f.doc(n), &m); err != nil {
		t.Fatal(err)
	}
	if recipe != 0 {
		m["ring_recipe"] = recipe
	}
	b, _ := json.Marshal(m)
	return b
}

// refusedUnderLoad reports whether a fleet member refused a command, not
// sent, for want of time under its lease: the move of its key outlived the
// lease, or the process fenced itself (see refused).
func refusedUnderLoad(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || refused(err)
}

// TestFleetRecipeChange moves a fleet from Recipe1 to Recipe2 and back
// with apply, under writes: the members follow the document's recipe,
// most keys change owner, and every acknowledged write is read back from
// the owner the new recipe names.
func TestFleetRecipeChange(t *testing.T) {
	f := newFleet(t, 3)
	ctx := context.Background()
	f.apply(t, ctx, f.doc(3))
	a, b := f.client(t, f.open(t), "p0"), f.client(t, f.open(t), "p1")
	const keys = 300
	for i := range keys {
		if err := a.Set(ctx, fmt.Sprintf("k%d", i), 0, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	last := map[string]int{}
	var cut atomic.Int64 // commands refused because their key's move outlived the lease
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			k := fmt.Sprintf("k%d", n%keys)
			// A command that must first move its key is refused when the
			// move outlives the process's lease (moveContext:
			// DeadlineExceeded) or no heartbeat got through for a lease
			// (ErrFenced): a loaded machine makes both happen. The SET
			// was then not sent; it is not acknowledged, and a later one
			// writes the key.
			if err := a.Set(ctx, k, n, 0).Err(); refusedUnderLoad(err) {
				cut.Add(1)
				continue
			} else if err != nil {
				t.Errorf("SET %s: %v", k, err)
				return
			}
			mu.Lock()
			last[k] = n
			mu.Unlock()
			got, err := b.Get(ctx, k).Int()
			if refusedUnderLoad(err) {
				cut.Add(1)
				continue
			}
			if err != nil || got < n {
				t.Errorf("GET %s through the other member: %d, %v; want %d", k, got, err, n)
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	check := func(recipe int) {
		t.Helper()
		want := recipe
		if want == 0 {
			want = ring.Recipe1
		}
		for i, c := range []*redshard.Client{a, b} {
			if got := c.Ring().Recipe(); got != want {
				t.Errorf("member %d: ring recipe %d, want %d", i, got, want)
			}
		}
		r, err := ring.New([]ring.Node{{Name: "s0"}, {Name: "s1"}, {Name: "s2"}}, &ring.Config{Recipe: recipe})
		if err != nil {
			t.Fatal(err)
		}
		for i := range keys {
			k := fmt.Sprintf("k%d", i)
			owner := r.Lookup(k)
			for j, m := range f.mini {
				if has := m.Exists(k); has != (fmt.Sprintf("s%d", j) == owner) {
					t.Errorf("recipe %d: %s on server s%d: %v (owner %s)", want, k, j, has, owner)
				}
			}
		}
	}
	rep := f.apply(t, ctx, recipeDoc(t, f, 3, ring.Recipe2))
	if rep.Rebalance.Moved < keys/2 {
		t.Errorf("Recipe1 to Recipe2 moved %d of %d keys; most should move", rep.Rebalance.Moved, keys)
	}
	close(stop)
	wg.Wait()
	check(ring.Recipe2)
	rep = f.apply(t, ctx, f.doc(3)) // back: no ring_recipe means Recipe1
	if rep.Rebalance.Moved < keys/2 {
		t.Errorf("Recipe2 to Recipe1 moved %d of %d keys", rep.Rebalance.Moved, keys)
	}
	check(0)
	if n := cut.Load(); n > 0 {
		t.Logf("%d commands refused because their key's move outlived the lease", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for k, n := range last {
		if got, err := b.Get(ctx, k).Int(); err != nil || got != n {
			t.Errorf("GET %s = %d, %v; want %d", k, got, err, n)
		}
	}
}
