package node

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/punch"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/transport"
	"github.com/peerfs/peerfs/internal/wire"
)

// Direct paths through NATs (docs/PROTOCOL.md, PUNCH).
//
// While a link runs through a relay, the device with the smaller ID now and then sends PUNCH
// over it with its candidates: the addresses of its interfaces and the addresses its relays
// observed it at, each with the port it listens on. The peer answers with its own and starts
// punching (punch.Listener.Punch: connects from the listening port, TCP simultaneous open)
// to each of the opener's; the opener punches the peer's as the answer arrives. The first
// connection that opens on either side carries the devices' TLS (the smaller ID is the
// client) and becomes a link; a direct link takes the place of a relayed one
// (peer.setSession), so the other connections are dropped.
const (
	// punchWait bounds one punch on each side: a few round trips through both routers plus
	// the kernel's first SYN retransmission (1 s).
	punchWait = 5 * time.Second
)

// listenPeers binds the peer listener at addr so that punches can connect from its port
// (SO_REUSEADDR, and SO_REUSEPORT on Unix). Those options would let a second daemon bind the
// same port without an error, so the port is first bound without them: a port in use fails
// there, as it always did.
func listenPeers(addr string) (*punch.Listener, error) {
	probe, err := transport.Listen(addr)
	if err != nil {
		return nil, err
	}
	bound := probe.Addr().String()
	probe.Close()
	return punch.Listen(context.Background(), bound)
}

// ownCandidates are where the peer may reach us: the listener's address or, when it listens
// on every address, the addresses of the interfaces (kind local), then the addresses the
// relays last saw us at (kind observed), all with the listening port.
func (n *Node) ownCandidates() []punch.Candidate {
	if n.punchLn == nil {
		return nil
	}
	port := n.punchLn.Port()
	var out []punch.Candidate
	add := func(kind punch.CandidateKind, a netip.Addr) {
		a = a.Unmap()
		if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalUnicast() || a.Zone() != "" ||
			len(out) >= punch.MaxCandidates {
			return
		}
		ap := netip.AddrPortFrom(a, port)
		if slices.ContainsFunc(out, func(c punch.Candidate) bool { return c.Addr == ap }) {
			return
		}
		out = append(out, punch.Candidate{Kind: kind, Addr: ap})
	}
	if bound := addrPort(n.punchLn.Addr()).Addr(); bound.IsValid() && !bound.IsUnspecified() {
		add(punch.CandidateLocal, bound)
	} else if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if pfx, err := netip.ParsePrefix(a.String()); err == nil && !pfx.Addr().IsLoopback() {
				add(punch.CandidateLocal, pfx.Addr())
			}
		}
	}
	for _, rc := range n.relayClients() {
		add(punch.CandidateObserved, rc.observedAddr().Addr())
	}
	return out
}

func addrPort(a net.Addr) netip.AddrPort {
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

// punchOnce runs one PUNCH over sess, a relayed link, as its opener.
func (p *peer) punchOnce(ctx context.Context, sess *rpc.Session, id identity.DeviceID) error {
	own := p.n.ownCandidates()
	if len(own) == 0 {
		return errors.New("no candidate address of our own to offer")
	}
	m := &punch.Message{Type: punch.MsgCandidates, Attempt: rand.Uint32(), Candidates: own}
	body, err := m.MarshalBinary()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, punchWait)
	buf, err := sess.Call(cctx, wire.OpPunch, body)
	cancel()
	if err != nil {
		var re *wire.RemoteError
		if errors.As(err, &re) && re.Code == wire.ErrnoUnsupported {
			p.mu.Lock()
			p.noPunch = sess
			p.mu.Unlock()
		}
		return fmt.Errorf("PUNCH: %w", err)
	}
	var reply punch.Message
	err = reply.UnmarshalBinary(buf.Payload())
	buf.Release()
	if err != nil || reply.Type != punch.MsgCandidates || reply.Attempt != m.Attempt {
		return fmt.Errorf("PUNCH reply: %v", err)
	}
	p.noteTold(reply.Candidates)
	return p.punchAll(ctx, id, reply.Candidates)
}

// servePunch answers a PUNCH from the peer, then punches its candidates.
func (p *peer) servePunch(r *rpc.Request) {
	var m punch.Message
	if err := m.UnmarshalBinary(r.Payload()); err != nil || m.Type != punch.MsgCandidates {
		r.Fail(wire.ErrnoProtocol, fmt.Sprintf("PUNCH: %v", err))
		return
	}
	if p.n.punchLn == nil {
		r.Fail(wire.ErrnoUnsupported, "this device does not listen (a foreground mount): it cannot be punched to")
		return
	}
	reply := &punch.Message{Type: punch.MsgCandidates, Attempt: m.Attempt, Candidates: p.n.ownCandidates()}
	body, err := reply.MarshalBinary()
	if err != nil {
		r.Fail(wire.EIO, err.Error())
		return
	}
	p.noteTold(m.Candidates)
	if err := r.Reply(body); err != nil {
		return
	}
	ctx := p.n.runContext()
	if ctx == nil {
		return
	}
	p.mu.Lock()
	id := p.cfg.ID
	p.mu.Unlock()
	go func() {
		if err := p.punchAll(ctx, id, m.Candidates); err != nil {
			p.n.log.Debug("punch failed; the link stays relayed", "peer", p.name(), "err", err)
		}
	}()
}

// punchAll punches every candidate at once for up to punchWait and makes a link of the first
// connection that opens.
func (p *peer) punchAll(ctx context.Context, id identity.DeviceID, cands []punch.Candidate) error {
	if len(cands) == 0 {
		return errors.New("the peer offered no candidate")
	}
	ctx, cancel := context.WithTimeout(ctx, punchWait)
	defer cancel()
	type result struct {
		conn net.Conn
		c    punch.Candidate
		err  error
	}
	results := make(chan result, len(cands))
	for _, c := range cands {
		go func() {
			r, err := p.n.punchLn.Punch(ctx, c.Addr, nil)
			if err != nil {
				results <- result{nil, c, err}
				return
			}
			results <- result{r.Conn, c, nil}
		}()
	}
	var errs []error
	for i := range cands {
		r := <-results
		if r.err != nil {
			p.tried(r.c.Addr.String(), candidatePeer, r.err)
			errs = append(errs, fmt.Errorf("%s: %w", r.c.Addr, r.err))
			continue
		}
		cancel()
		if rest := len(cands) - i - 1; rest > 0 {
			go func() {
				for range rest {
					if r := <-results; r.conn != nil {
						r.conn.Close()
					}
				}
			}()
		}
		kind := api.PathDirect
		if r.c.Kind == punch.CandidateObserved {
			kind = api.PathPunched
		}
		err := p.linkPunched(id, r.conn, kind)
		p.tried(r.c.Addr.String(), candidatePeer, err)
		return err
	}
	return dialErrors(errs)
}

// linkPunched runs the devices' TLS on a punched connection (the smaller ID is the client)
// and makes it a link.
func (p *peer) linkPunched(id identity.DeviceID, raw net.Conn, kind string) error {
	ctx := p.n.runContext()
	if ctx == nil {
		raw.Close()
		return errors.New("node stopping")
	}
	setDeadPathTimeout(raw)
	var conn *transport.Conn
	var err error
	if punch.IsTLSClient(p.n.id.ID, id) {
		conn, err = transport.Client(ctx, raw, p.n.tcfg, id)
	} else {
		conn, err = transport.Server(ctx, raw, p.n.tcfg)
		if err == nil && conn.Peer != id {
			conn.Close()
			err = fmt.Errorf("%w: a punched connection led to %s", transport.ErrWrongPeer, conn.Peer.Short())
		}
	}
	if err != nil {
		return err
	}
	return p.n.attachVia(conn, linkPath{kind: kind})
}

// noteTold keeps the candidates the peer sent: its interface addresses are dialled like any
// other direct candidate (source "peer"); observed ones are only punched, since a plain dial
// to a router that lets nothing in waits for its timeout.
func (p *peer) noteTold(cands []punch.Candidate) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.told = p.told[:0]
	for _, c := range cands {
		if c.Kind == punch.CandidateLocal {
			p.told = append(p.told, c.Addr)
		}
	}
}

// canPunch reports whether we open PUNCH on sess: a relayed link, a listener to punch from,
// the smaller ID, and a peer that has not refused PUNCH on this link.
func (p *peer) canPunch(sess *rpc.Session, id identity.DeviceID) bool {
	p.mu.Lock()
	refused := p.noPunch == sess
	p.mu.Unlock()
	return !refused && p.n.punchLn != nil && !p.n.keepRelayed && punch.IsTLSClient(p.n.id.ID, id)
}
