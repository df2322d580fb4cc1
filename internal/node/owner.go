//go:build !windows

package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/peerfs/peerfs/internal/rpc"
)

// mountLink gives a mount's calls (remote.Share) the node's link to the peer: each call
// waits a bounded time for the link, then fails (EIO to the application).
type mountLink struct {
	p    *peer
	wait time.Duration
}

var errLinkDown = errors.New("peer unreachable")

// Link waits for the link (an interrupted wait returns EINTR) and returns the context for the
// call itself, which a signal does not cancel: a local filesystem does not fail lstat or rmdir
// with EINTR, and programs (stress-ng, make) do not expect it. A dead link still ends the
// call, through keepalive. Until done is called, a link being replaced stays open for the
// call (rekey.go).
func (l mountLink) Link(ctx context.Context) (*rpc.Session, context.Context, func(), error) {
	sess, use, err := l.p.acquire(ctx, l.wait)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", errLinkDown, err) // an interrupted wait stays EINTR
	}
	return sess, context.WithoutCancel(ctx), use.done, nil
}
