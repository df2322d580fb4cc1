package node

import (
	"net/netip"
	"slices"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
)

// A candidate is an address a peer may be dialled at directly, and where we learnt it.
type candidate struct {
	addr   string
	source string // candidateConfig or candidateLAN
}

const (
	candidateConfig = "config" // the peer's --addr
	candidateLAN    = "lan"    // announced on the local network (discovery)
	// lanAddrTTL is how long a LAN-discovered address is tried after its last announcement:
	// a device that left the network is forgotten, one that moved is found at its new one.
	lanAddrTTL = 2 * time.Minute
)

// lanAddr is an address LAN discovery found the peer at, and when.
type lanAddr struct {
	addr netip.AddrPort
	seen time.Time
}

// directCandidates lists the addresses to dial the peer at, the configured one first, then
// those discovery heard the peer at, the latest first.
func (p *peer) directCandidates(now time.Time) []candidate {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []candidate
	if p.cfg.Addr != "" {
		out = append(out, candidate{p.cfg.Addr, candidateConfig})
	}
	// The address heard last first: after a peer moves, its old address is only a timeout.
	lan := slices.Clone(p.lan)
	slices.SortStableFunc(lan, func(a, b lanAddr) int { return b.seen.Compare(a.seen) })
	for _, l := range lan {
		if now.Sub(l.seen) <= lanAddrTTL {
			out = append(out, candidate{l.addr.String(), candidateLAN})
		}
	}
	return out
}

// noteLANAddrs records that discovery found the trusted peer id at addrs. A new address
// wakes the dial loop at once, so a peer that appears on (or moves within) the network is
// linked without waiting out a backoff.
func (n *Node) noteLANAddrs(id identity.DeviceID, addrs []netip.AddrPort) {
	n.mu.Lock()
	p := n.peers[id]
	n.mu.Unlock()
	if p == nil {
		return
	}
	now := time.Now()
	fresh := false
	p.mu.Lock()
	p.lan = slices.DeleteFunc(p.lan, func(l lanAddr) bool { return now.Sub(l.seen) > lanAddrTTL })
	for _, a := range addrs {
		i := slices.IndexFunc(p.lan, func(l lanAddr) bool { return l.addr == a })
		if i < 0 {
			p.lan = append(p.lan, lanAddr{a, now})
			fresh = true
			continue
		}
		p.lan[i].seen = now
	}
	p.mu.Unlock()
	if fresh {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}
