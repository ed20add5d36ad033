package redshard

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/hot"
	"github.com/redshard/redshard/internal/keymove"
)

// settledPrefix names the settled set of a change on each new owner
// (internal/keymove): settledPrefix + change id. It is one of redshard's
// internal keys.
const settledPrefix = "redshard:settled:"

// settledTTL is a backstop: a settled set outlives an abandoned change by
// at most this long. A completed change deletes its sets.
const settledTTL = keymove.SettledTTL

// InternalKeyPrefix starts the name of every key redshard stores for
// itself: split copies of hot keys, GetOrLoad leases, and the settled sets
// of membership changes. Such keys are hidden from KEYS, SCAN and RANDOMKEY
// through the client, never moved by Rebalance as user data, and expire or
// are deleted on their own. Do not use keys with this prefix for data.
const InternalKeyPrefix = "redshard:"

// isInternalKey reports whether key is one of redshard's own.
func isInternalKey(key string) bool { return strings.HasPrefix(key, InternalKeyPrefix) }

// InternalIndexKey names a set, on each server, of the internal keys
// redshard created there: DBSIZE through the client subtracts those still
// alive, at the cost of the index's size rather than a scan of the key
// space. A key that misses the index (its SADD failed) is counted by
// DBSIZE until it expires. A tool that deletes internal keys should remove
// them from the index too.
const InternalIndexKey = InternalKeyPrefix + "index"

const internalIndex = InternalIndexKey

// indexInternal records an internal key in its server's index; cmd is the
// command that creates it, sent in the same pipeline. The index expires a
// while after the last key was added (its members expire long before).
func indexInternal(ctx context.Context, cl *redis.Client, cmd redis.Cmder, key string) error {
	_, _ = cl.Pipelined(ctx, func(p redis.Pipeliner) error {
		_ = p.Process(ctx, cmd)
		p.SAdd(ctx, internalIndex, key)
		p.PExpire(ctx, internalIndex, settledTTL)
		return nil
	})
	return cmd.Err()
}

// deleteInternal deletes an internal key and its index entry.
func deleteInternal(ctx context.Context, cl *redis.Client, key string) error {
	_, err := cl.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		p.SRem(ctx, internalIndex, key)
		return nil
	})
	return err
}

// isMarkChannel reports whether a Pub/Sub channel is one of the mark
// channels of LocalCache's write-through refills (internal/hot).
func isMarkChannel(ch string) bool { return strings.HasPrefix(ch, hot.MarkChannelPrefix) }
