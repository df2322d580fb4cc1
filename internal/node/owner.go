//go:build !windows

package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/rpc"
)

// mountLink gives a mount's calls (remote.Share) the node's link to the peer: each call
// waits a bounded time for the link, then fails (EIO to the application).
type mountLink struct {
	p    *peer
	wait time.Duration
}

var errLinkDown = errors.New("peer unreachable")

// offlineWait bounds an impatient call's wait (a read, a listing) while the peer is offline:
// it waits for the try it kicks, which may find the peer back, and gives up when that try
// fails or after this long (a try that hangs), so that an application reading what the mount
// has not cached gets EIO at once, not after the mount's --wait.
const offlineWait = 1500 * time.Millisecond

// Link waits for the link (an interrupted wait returns EINTR) and returns the context for the
// call itself, which a signal does not cancel: a local filesystem does not fail lstat or rmdir
// with EINTR, and programs (stress-ng, make) do not expect it. A dead link still ends the
// call, through keepalive. Until done is called, a link being replaced stays open for the
// call (rekey.go).
func (l mountLink) Link(ctx context.Context, pat remote.Patience) (*rpc.Session, context.Context, func(), error) {
	wait, offline := l.wait, pat == remote.Impatient && l.p.offline()
	if offline {
		wait = min(wait, offlineWait)
	}
	sess, use, err := l.p.acquire(ctx, wait, offline)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", errLinkDown, err) // an interrupted wait stays EINTR
	}
	return sess, context.WithoutCancel(ctx), use.done, nil
}
