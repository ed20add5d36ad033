package registry

import "github.com/redis/go-redis/v9"

// NewRedisLossy is NewRedisOptions with announcements sent to a channel no
// watcher hears, so watchers only learn of its publishes by polling.
func NewRedisLossy(rdb redis.UniversalClient, name string, opt *Options) (Registry, error) {
	r, err := newRedis(rdb, name, opt)
	if err != nil {
		return nil, err
	}
	r.announce = name + ":lost"
	return r, nil
}
