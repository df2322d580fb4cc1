package node

import (
	"context"

	"github.com/peerfs/peerfs/internal/rpc"
)

// Session returns the link to the named peer, dialling or waiting for it as a command would
// (up to connectWait), for tests that speak to the peer's shares directly through remote.Peer.
// It is defined for tests only: the product reaches a peer through its transfers and mounts.
func (n *Node) Session(ctx context.Context, peer string) (*rpc.Session, error) {
	_, sess, err := n.link(ctx, peer)
	return sess, err
}
