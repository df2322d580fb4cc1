package node

import (
	"net/netip"
	"slices"
	"time"

	"github.com/peerfs/peerfs/internal/api"
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
	candidateRelay  = "relay"  // a relay both may meet at (status only: relays are not addresses)
	candidatePeer   = "peer"   // sent by the peer over a relayed link (PUNCH)
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
	return p.directCandidatesLocked(now)
}

func (p *peer) directCandidatesLocked(now time.Time) []candidate {
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
	for _, a := range p.told {
		if !slices.ContainsFunc(out, func(c candidate) bool { return c.addr == a.String() }) {
			out = append(out, candidate{a.String(), candidatePeer})
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

// tried records how the attempt at a candidate or relay went, for status.
func (p *peer) tried(addr, source string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := api.CandidateStatus{Addr: addr, Source: source, Tried: time.Now()}
	if err != nil {
		st.Error = err.Error()
	}
	if i := slices.IndexFunc(p.tries, func(c api.CandidateStatus) bool { return c.Addr == addr }); i >= 0 {
		p.tries[i] = st
		return
	}
	p.tries = append(p.tries, st)
}

// candidateStatus lists what status shows of the candidates: those tried, then those known
// but not tried yet, and the relays. p.mu is held.
func (p *peer) candidateStatusLocked(now time.Time, relays []*relayClient) []api.CandidateStatus {
	out := []api.CandidateStatus{}
	known := map[string]bool{}
	add := func(addr, source string) {
		if known[addr] {
			return
		}
		known[addr] = true
		if i := slices.IndexFunc(p.tries, func(c api.CandidateStatus) bool { return c.Addr == addr }); i >= 0 {
			out = append(out, p.tries[i])
			return
		}
		out = append(out, api.CandidateStatus{Addr: addr, Source: source})
	}
	for _, c := range p.directCandidatesLocked(now) {
		add(c.addr, c.source)
	}
	for _, rc := range relays {
		add(rc.url.Redacted(), candidateRelay)
	}
	return out
}

// kickDial wakes the dial loop: try now.
func (p *peer) kickDial() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}
