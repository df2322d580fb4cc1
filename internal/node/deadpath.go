package node

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/transport"
)

// deadPathTimeout is how long sent data may go unacknowledged on a link's TCP connection
// before the kernel gives the connection up (TCP_USER_TIMEOUT, Linux). Without it a path
// that died (a router rebooted, a firewall cut it) is noticed by the keepalive only after
// 30 s of silence plus the time to the next PING, 40 s in the lab
// (TestLabDirectPathCutMidMount); with it, as soon as a request or a PING has waited this
// long, so a mount falls back to the relay within about this time of its next request. A
// live path acknowledges within a few round trips, even a congested one; 10 s is far past
// any RTO a working path has.
const deadPathTimeout = 10 * time.Second

// linkProbeWait is how long the link our calls use has to answer a probe (probeCurrent): a
// few round trips on any path that works.
const linkProbeWait = 3 * time.Second

// probeCurrent checks that the link our calls use still answers, after the peer opened
// another link while ours looked live. A device dials only when it has lost its link, so
// ours may be dead without our knowing: a path that died without a reset is noticed only
// once sent data has waited deadPathTimeout, or the keepalive gives up. A link that does not
// answer SHARES within linkProbeWait is closed, and the peer's new link takes its place
// (clearSession).
func (p *peer) probeCurrent() {
	p.mu.Lock()
	sess := p.sess
	p.mu.Unlock()
	if sess == nil || sess.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), linkProbeWait)
	defer cancel()
	if _, err := (remote.Peer{S: sess}).Shares(ctx); err != nil && sess.Err() == nil {
		p.n.log.Info("the link in use does not answer while the peer opened another; closing it", "peer", p.name(), "err", err)
		sess.Close(fmt.Errorf("no answer within %v while the peer opened another link: %w", linkProbeWait, err))
	}
}

// dialTCP connects to addr and runs our TLS to the peer id on it, like transport.Dial, with
// the connection set to give up on a dead path (deadPathTimeout).
func (n *Node) dialTCP(ctx context.Context, addr string, id identity.DeviceID) (*transport.Conn, error) {
	raw, err := dialDeadPath(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	conn, err := transport.Client(ctx, raw, n.tcfg, id)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	return conn, nil
}

// dialDeadPath is a net.Dialer's DialContext whose connections give up on a dead path.
func dialDeadPath(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	setDeadPathTimeout(c)
	return c, nil
}
