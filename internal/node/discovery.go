package node

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/peerfs/peerfs/internal/discover"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/wire"
)

// LAN discovery: while Run runs, a daemon's node announces on the local network the tags its
// trusted peers can recognise and browses for theirs (internal/discover); every address a
// peer is heard at becomes a dial candidate (noteLANAddrs, candidates.go), so peers on one
// network link with no address configured. A standalone node (a foreground mount) browses
// but announces nothing: it has no listener to be dialled at.

// peersPoll is how often the trusted peers are compared with what discovery looks for; a
// peer added or removed is announced and looked for within it.
const peersPoll = time.Second

const (
	// probeWait is how long a probed link may take to answer: a round trip on a LAN takes
	// well under a millisecond, on a loaded machine a few.
	probeWait = 3 * time.Second
	// probeEvery bounds the probes of one link, for a peer heard at several addresses.
	probeEvery = 30 * time.Second
)

// discovery is the node's LAN discovery, set by Options and Run.
type discovery struct {
	on         bool          // Options.Discovery
	epoch      time.Duration // Options.DiscoveryEpoch
	interfaces []string      // Options.DiscoveryInterfaces

	mu     sync.Mutex
	svc    *discover.Service          // nil while discovery is off or Run is not running
	probed map[*rpc.Session]time.Time // links probed (discovered), when
}

// Discovery returns the running LAN discovery service, nil when it is off (--no-discovery,
// "discovery": false) or the node is not running. Pairing announces and looks up its
// rendezvous tag through it (AnnounceTag, Lookup).
func (n *Node) Discovery() *discover.Service {
	n.disc.mu.Lock()
	defer n.disc.mu.Unlock()
	return n.disc.svc
}

// startDiscovery starts LAN discovery unless it is turned off; stop ends it.
func (n *Node) startDiscovery(ctx context.Context) (stop func()) {
	n.mu.Lock()
	on := n.disc.on && n.cfg.DiscoveryOn()
	n.mu.Unlock()
	if !on {
		n.log.Info("LAN discovery is off")
		return func() {}
	}
	var port uint16
	var addr netip.Addr
	ifs := n.disc.interfaces
	if n.ln != nil {
		if a, ok := n.ln.Addr().(*net.TCPAddr); ok {
			port = uint16(a.Port)
			switch {
			case ifs != nil:
			case a.IP.IsLoopback():
				// A listener on a loopback address is reached from this machine alone:
				// say so there only, and send nothing onto the network.
				ifs = loopbackInterfaces()
			case !a.IP.IsUnspecified():
				// A listener on one address: announce that address, on its interface.
				addr, _ = netip.AddrFromSlice(a.IP)
				addr = addr.Unmap()
				ifs = interfacesWith(addr)
			}
		}
	}
	svc, err := discover.Start(discover.Options{
		Self:       n.id.ID,
		Port:       port,
		Addr:       addr,
		OnFound:    n.discovered,
		Logger:     n.log,
		Interfaces: ifs,
		Epoch:      n.disc.epoch,
	})
	if err != nil {
		n.log.Warn("LAN discovery cannot start; peers are reached at their configured addresses only", "err", err)
		return func() {}
	}
	n.disc.mu.Lock()
	n.disc.svc = svc
	n.disc.mu.Unlock()
	loopCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.discoveryLoop(loopCtx, svc)
	}()
	return func() {
		cancel()
		<-done
		n.disc.mu.Lock()
		n.disc.svc = nil
		n.disc.mu.Unlock()
		svc.Close()
	}
}

// discoveryLoop keeps the peers discovery announces to and looks for equal to the trusted
// peers, until ctx ends.
func (n *Node) discoveryLoop(ctx context.Context, svc *discover.Service) {
	var last []discover.Peer
	t := time.NewTicker(peersPoll)
	defer t.Stop()
	for {
		if peers := n.discoveryPeers(); !slices.EqualFunc(peers, last, samePeer) || last == nil {
			svc.SetPeers(peers)
			last = peers
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func samePeer(a, b discover.Peer) bool { return a.ID == b.ID && bytes.Equal(a.Secret, b.Secret) }

// discoveryPeers lists the trusted peers, in config order, with their pairing secrets.
func (n *Node) discoveryPeers() []discover.Peer {
	n.mu.Lock()
	defer n.mu.Unlock()
	peers := make([]discover.Peer, 0, len(n.cfg.Peers))
	for _, pc := range n.cfg.Peers {
		peers = append(peers, discover.Peer{ID: pc.ID, Secret: slices.Clone(pc.Secret)})
	}
	return peers
}

// discovered hands an address a trusted peer was heard at to its dial loop, and probes the
// peer's link when the peer is heard at an address other than the one the link runs to.
func (n *Node) discovered(f discover.Found) {
	n.noteLANAddrs(f.Peer, []netip.AddrPort{f.Addr})
	n.mu.Lock()
	p := n.peers[f.Peer]
	n.mu.Unlock()
	if p == nil {
		return
	}
	p.mu.Lock()
	sess, conn := p.sess, p.conn
	p.mu.Unlock()
	if sess == nil || sess.Err() != nil {
		return
	}
	remote, err := netip.ParseAddrPort(conn.RemoteAddr().String())
	if err != nil || remote.Addr().Unmap().WithZone("") == f.Addr.Addr().Unmap().WithZone("") {
		return
	}
	n.disc.mu.Lock()
	if n.disc.probed == nil {
		n.disc.probed = map[*rpc.Session]time.Time{}
	}
	for s := range n.disc.probed {
		if s.Err() != nil {
			delete(n.disc.probed, s)
		}
	}
	last, seen := n.disc.probed[sess]
	if seen && time.Since(last) < probeEvery {
		n.disc.mu.Unlock()
		return
	}
	n.disc.probed[sess] = time.Now()
	n.disc.mu.Unlock()
	go n.probeLink(p, sess, f.Addr)
}

// probeLink sends the link one request; with no answer within probeWait the link is closed,
// so that the dial loop links again at once, at the address the peer was just heard at.
//
// A peer that moved to another address leaves its link to us dead, and keepalive would take
// up to 3 intervals (30 s) to notice (rpc.DefaultKeepalive); hearing the peer elsewhere is
// the hint to ask now. A link that answers is left alone: a peer may announce several
// addresses (IPv4 and IPv6, two interfaces).
func (n *Node) probeLink(p *peer, sess *rpc.Session, heard netip.AddrPort) {
	ctx, cancel := context.WithTimeout(context.Background(), probeWait)
	defer cancel()
	buf, err := sess.Call(ctx, wire.OpShares, nil)
	if err == nil {
		buf.Release()
		return
	}
	if sess.Err() != nil {
		return
	}
	n.log.Info("closing a silent link: the peer was heard at another address", "peer", p.name(), "heard_at", heard, "err", err)
	sess.Close(fmt.Errorf("no answer within %v after the peer was heard at %v", probeWait, heard))
}

// loopbackInterfaces names the loopback interfaces; never nil, so that none found means
// none used.
func loopbackInterfaces() []string {
	names := []string{}
	ifs, _ := net.Interfaces()
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagLoopback != 0 {
			names = append(names, ifi.Name)
		}
	}
	return names
}

// interfacesWith names the interfaces that hold addr; never nil.
func interfacesWith(addr netip.Addr) []string {
	names := []string{}
	ifs, _ := net.Interfaces()
	for _, ifi := range ifs {
		addrs, _ := ifi.Addrs()
		for _, a := range addrs {
			if p, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(p.IP); ok && ip.Unmap() == addr {
					names = append(names, ifi.Name)
				}
			}
		}
	}
	return names
}
