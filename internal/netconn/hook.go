package netconn

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// CloseHook is a go-redis hook that reports, through OnClose, the close
// of every connection its client dials (see Watch).
type CloseHook struct {
	OnClose func()
	// Clock, if not nil, gates go-redis's checks of the connections as
	// Set.Track's clock does: a connection that answered within the
	// current tick is not checked.
	Clock *atomic.Uint32
}

// DialHook wraps each dialed connection with Watch.
func (h CloseHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return Watch(c, h.OnClose, h.Clock), nil
	}
}

// ProcessHook returns next.
func (CloseHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook returns next.
func (CloseHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// CheckedHook is a go-redis hook that makes every command it sees take a
// checked connection of Set (Set.CheckAll): for a client whose commands
// go-redis does not run again, such as a Conn's transaction.
type CheckedHook struct{ Set *Set }

// DialHook returns next.
func (h CheckedHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook runs next under Set.CheckAll.
func (h CheckedHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		defer h.Set.CheckAll()()
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook runs next under Set.CheckAll.
func (h CheckedHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		defer h.Set.CheckAll()()
		return next(ctx, cmds)
	}
}
