package node

import (
	"context"
	"errors"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/transport"
)

// Session returns the link to the named peer, dialling or waiting for it as a command would
// (up to connectWait), for tests that speak to the peer's shares directly through remote.Peer.
// It is defined for tests only: the product reaches a peer through its transfers and mounts.
func (n *Node) Session(ctx context.Context, peer string) (*rpc.Session, error) {
	_, sess, err := n.link(ctx, peer)
	return sess, err
}

// DialAgain dials the named peer at addr and attaches the link even while one is up, as
// happens when both devices dial at once.
func (n *Node) DialAgain(ctx context.Context, peer, addr string) error {
	p, err := n.peerByName(peer)
	if err != nil {
		return err
	}
	conn, err := transport.Dial(ctx, addr, n.tcfg, p.cfg.ID)
	if err != nil {
		return err
	}
	return n.attachVia(conn, linkPath{kind: api.PathDirect})
}

// DialThroughRelay meets the named peer at the first relay and attaches the link even while
// one is up, as when one device reached the other through a relay while the other dialled it.
func (n *Node) DialThroughRelay(ctx context.Context, peer string) error {
	p, err := n.peerByName(peer)
	if err != nil {
		return err
	}
	rcs := n.relayClients()
	if len(rcs) == 0 {
		return errors.New("no relay")
	}
	conn, err := n.dialRelay(ctx, rcs[0], p.cfg.ID)
	if err != nil {
		return err
	}
	return n.attachVia(conn, linkPath{kind: api.PathRelayed, via: rcs[0].url.Redacted()})
}

// PeerOffline reports whether the named peer counts as offline (peer.offline): no link, and
// the last try to reach it failed.
func (n *Node) PeerOffline(peer string) bool {
	p, err := n.peerByName(peer)
	return err == nil && p.offline()
}
