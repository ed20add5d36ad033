package integration_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/redistest"
)

// TestACLUserReachesEveryShard checks that ShardOptions' ACL user and
// password reach every shard client, and that no error or description
// prints the password.
func TestACLUserReachesEveryShard(t *testing.T) {
	ctx := context.Background()
	acl := redistest.Args("--user", "app", "on", ">s3cret-pw", "~*", "&*", "+@all")
	a, b := redistest.Start(t, acl), redistest.Start(t, acl)
	shards := []redshard.Shard{{Name: "a", Addr: a.Addr()}, {Name: "b", Addr: b.Addr()}}
	c, err := redshard.NewClient(&redshard.Options{
		Shards:       shards,
		ShardOptions: &redis.Options{Username: "app", Password: "s3cret-pw"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.ForEachShard(ctx, func(ctx context.Context, sc *redis.Client) error {
		who, err := sc.Do(ctx, "acl", "whoami").Text()
		if err == nil && who != "app" {
			err = errors.New("connected as " + who)
		}
		return err
	})
	if err != nil {
		t.Fatalf("ACL user on the shards: %v", err)
	}
	if err := c.MSet(ctx, "k1", 1, "k2", 2, "k3", 3, "k4", 4).Err(); err != nil {
		t.Fatal(err)
	}

	bad, err := redshard.NewClient(&redshard.Options{
		Shards:       shards,
		ShardOptions: &redis.Options{Username: "app", Password: "wrong-pw", MaxRetries: -1},
		Health:       &redshard.HealthOptions{Disable: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	err = bad.Get(ctx, "k1").Err()
	if err == nil || strings.Contains(err.Error(), "wrong-pw") || strings.Contains(bad.String(), "wrong-pw") {
		t.Fatalf("GET with a wrong password: %v (client %s)", err, bad)
	}
}
