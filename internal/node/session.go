package node

import (
	"context"

	"github.com/peerfs/peerfs/internal/rpc"
)

// Session returns the link to the named peer, dialling or waiting for it as a command would
// (up to connectWait). It is for callers that speak to the peer's shares directly through
// remote.Peer: tests, and components beside the transfers.
func (n *Node) Session(ctx context.Context, peer string) (*rpc.Session, error) {
	_, sess, err := n.link(ctx, peer)
	return sess, err
}
