package redshard_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/redshard/redshard"
)

// dialCounter is a go-redis logger (redis.SetLogger) that counts the
// "failed to dial" lines a down shard causes and passes every other line
// to the standard logger.
type dialCounter struct{ failed atomic.Int64 }

func (d *dialCounter) Printf(_ context.Context, format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	if strings.Contains(msg, "failed to dial") {
		d.failed.Add(1)
		return
	}
	log.Print(msg)
}

// go-redis logs each failed dial of every shard client on the standard
// logger: a killed shard prints dozens of lines. redis.SetLogger routes
// them (it is process-wide: call it once at start-up); logging.Disable
// drops them all.
func Example_goRedisLogs() {
	logs := &dialCounter{}
	redis.SetLogger(logs)
	defer logging.Enable() // this example restores go-redis's default logger

	rdb, err := redshard.NewClient(&redshard.Options{
		Shards:       []redshard.Shard{{Name: "down", Addr: "127.0.0.1:1"}}, // nothing listens there
		ShardOptions: &redis.Options{MaxRetries: -1, DialerRetries: 1},
		Health:       &redshard.HealthOptions{Disable: true},
	})
	if err != nil {
		panic(err)
	}
	defer rdb.Close()

	err = rdb.Get(context.Background(), "k").Err()
	fmt.Println("GET failed:", err != nil && !errors.Is(err, redis.Nil))
	fmt.Println("dial failures logged through the logger:", logs.failed.Load() > 0)
	// Output:
	// GET failed: true
	// dial failures logged through the logger: true
}
