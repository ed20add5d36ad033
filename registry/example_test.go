package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/registry"
)

// A driver takes the lock, begins a change and advances it one phase once
// every live process has acknowledged the current one; a process follows
// with Watch and acknowledges with Heartbeat.
func Example() {
	srv := miniredis.NewMiniRedis()
	if err := srv.Start(); err != nil {
		panic(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	reg := registry.NewRedis(rdb, "redshard:registry:example")
	defer reg.Close()
	ctx := context.Background()

	// Seed the registry with the fleet's ring (LoadConfig's format).
	first := registry.Initial(json.RawMessage(`{"shards":[{"name":"a","addr":"10.0.0.1:6379"}]}`))
	if err := reg.Publish(ctx, registry.Config{}, first); err != nil {
		panic(err)
	}

	// A process follows the registry and says what it has acknowledged.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	configs, err := reg.Watch(wctx)
	if err != nil {
		panic(err)
	}
	cur := <-configs
	_ = reg.Heartbeat(ctx, registry.Member{ID: "web-1", Epoch: cur.Epoch, Phase: cur.Phase})
	fmt.Println("process on", cur.Version())

	// The driver.
	lock, err := reg.Lock(ctx, "apply@ops-1", 30*time.Second)
	if err != nil {
		panic(err)
	}
	defer lock.Unlock(ctx)
	if _, err := reg.Lock(ctx, "apply@ops-2", 30*time.Second); errors.Is(err, registry.ErrLocked) {
		fmt.Println("second driver refused")
	}
	prepare := first.Begin(json.RawMessage(`{"shards":[{"name":"a","addr":"10.0.0.1:6379"},{"name":"b","addr":"10.0.0.2:6379"}]}`), "a-to-ab", "apply@ops-1")
	if err := reg.Publish(ctx, first, prepare); err != nil {
		panic(err)
	}
	if err := reg.Publish(ctx, first, prepare); errors.Is(err, registry.ErrConflict) {
		fmt.Println("stale publish refused")
	}

	members, _ := reg.Members(ctx)
	for _, m := range registry.Acked(members, prepare.Version()) {
		fmt.Println("not yet acknowledged by", m.ID)
	}
	cur = <-configs // the process learns of the change...
	_ = reg.Heartbeat(ctx, registry.Member{ID: "web-1", Epoch: cur.Epoch, Phase: cur.Phase})
	members, _ = reg.Members(ctx)
	if len(registry.Acked(members, prepare.Version())) == 0 {
		migrate, _ := prepare.Advance() // ...and the driver may go on.
		fmt.Println("driver may publish", migrate.Version())
	}
	// Output:
	// process on epoch 1 stable
	// second driver refused
	// stale publish refused
	// not yet acknowledged by web-1
	// driver may publish epoch 2 migrate
}
