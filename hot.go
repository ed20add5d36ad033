package redshard

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard/internal/command"
)

// HotKeyOptions configures hot-key detection and mitigation (not available yet: NewClient refuses a non-nil HotKeys).
type HotKeyOptions struct{}

// hotPath is the hot-key layer between routing and the shard clients.
type hotPath struct{}

func newHotPath(*Client, *HotKeyOptions) (*hotPath, error) {
	return nil, errors.New("redshard: hot-key mitigation is not available in this build")
}

// process runs a keyed command owned by shard i.
func (h *hotPath) process(ctx context.Context, top *topology, _ command.Info, cmd redis.Cmder, _ []int, i int) error {
	return top.shards[i].client.Process(ctx, cmd)
}

// written is told about every write that went through a path other than
// process (split commands, pipelines, transactions, Watch), after it ran.
func (h *hotPath) written(*topology, command.Info, []interface{}, []int) {}

func (h *hotPath) close() {}

// isSplitCopy reports whether key is the name of a split copy of a hot key.
func isSplitCopy(string) bool { return false }
