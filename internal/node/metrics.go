package node

import (
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/metrics"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/stats"
)

var _ metrics.Source = (*Node)(nil)

// metricsState is what the node keeps for its metrics beyond the counters it has anyway:
// finished transfers, and the bytes of links that are gone. Lock order: peer.mu, then mu.
type metricsState struct {
	mu        sync.Mutex
	transfers map[transferKey]*transferTotals
	// links are the links seen at a scrape, by the peer they belong to. A link gone by the
	// next scrape has its final byte counts moved to retired, so a peer's byte counters never
	// go back when a link is replaced. A link that opens and ends between two scrapes is
	// never seen: its bytes are missing from the counters.
	links   map[*rpc.Session]identity.DeviceID
	retired map[identity.DeviceID]linkBytes
}

type transferKey struct {
	peer identity.DeviceID
	kind string // "pull", "send"
}

type transferTotals struct {
	done, failed, bytes int64
}

type linkBytes struct{ in, out uint64 }

// transferDone counts a finished transfer. The caller holds the peer's lock, under which
// the transfer left the peer's list: a scrape sees its bytes either running or finished.
func (s *metricsState) transferDone(peer identity.DeviceID, st *api.TransferStatus, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.transfers == nil {
		s.transfers = map[transferKey]*transferTotals{}
	}
	k := transferKey{peer, st.Kind}
	t := s.transfers[k]
	if t == nil {
		t = new(transferTotals)
		s.transfers[k] = t
	}
	if err != nil {
		t.failed++
	} else {
		t.done++
	}
	t.bytes += st.Bytes
}

// Metrics returns the node's state for the metrics endpoint (internal/metrics): its peers
// and links, transfers, mounts and chunk cache, read from counters kept anyway.
func (n *Node) Metrics() metrics.Snapshot {
	n.mu.Lock()
	order := make([]*peer, 0, len(n.cfg.Peers))
	for _, pc := range n.cfg.Peers {
		if p := n.peers[pc.ID]; p != nil {
			order = append(order, p)
		}
	}
	n.mu.Unlock()

	var snap metrics.Snapshot
	ids := make([]identity.DeviceID, 0, len(order))
	live := map[*rpc.Session]identity.DeviceID{}
	for _, p := range order {
		p.mu.Lock()
		id := p.cfg.ID
		mp := metrics.Peer{Name: p.cfg.Name}
		for _, sess := range p.sessionsLocked() {
			live[sess] = id
			mp.BytesIn, mp.BytesOut = mp.BytesIn+sess.BytesIn(), mp.BytesOut+sess.BytesOut()
			if sess.Err() == nil {
				mp.Links++
			}
		}
		if p.sess != nil && p.sess.Err() == nil {
			mp.Connected, mp.RTT = true, p.sess.RTT()
		}
		for _, kind := range []string{"pull", "send"} {
			t := metrics.Transfers{Peer: mp.Name, Kind: kind}
			for _, st := range p.transfers {
				if st.Kind == kind {
					t.Active++
					t.Bytes += st.Bytes
				}
			}
			n.metrics.mu.Lock()
			if done := n.metrics.transfers[transferKey{id, kind}]; done != nil {
				t.Done, t.Failed, t.Bytes = done.done, done.failed, t.Bytes+done.bytes
			}
			n.metrics.mu.Unlock()
			snap.Transfers = append(snap.Transfers, t)
		}
		p.mu.Unlock()
		ids = append(ids, id)
		snap.Peers = append(snap.Peers, mp)
	}
	retired := n.metrics.retire(live)
	for i, id := range ids {
		snap.Peers[i].BytesIn += retired[id].in
		snap.Peers[i].BytesOut += retired[id].out
	}
	snap.Mounts, snap.Cache = n.mountMetrics()
	return snap
}

// retire moves the byte counts of the links seen at an earlier scrape but not among live
// (gone since) to the retired totals, remembers the live ones, and returns the totals. A
// link is counted either live or retired, never both.
func (s *metricsState) retire(live map[*rpc.Session]identity.DeviceID) map[identity.DeviceID]linkBytes {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.links == nil {
		s.links, s.retired = map[*rpc.Session]identity.DeviceID{}, map[identity.DeviceID]linkBytes{}
	}
	for sess, id := range s.links {
		if _, ok := live[sess]; !ok {
			r := s.retired[id]
			r.in, r.out = r.in+sess.BytesIn(), r.out+sess.BytesOut()
			s.retired[id] = r
			delete(s.links, sess)
		}
	}
	maps.Copy(s.links, live)
	return maps.Clone(s.retired)
}

// sessionsLocked returns the peer's links: the one calls use, and the others it opened.
func (p *peer) sessionsLocked() []*rpc.Session {
	out := make([]*rpc.Session, 0, 1+len(p.extra))
	if p.sess != nil {
		out = append(out, p.sess)
	}
	for _, l := range p.extra {
		out = append(out, l.sess)
	}
	return out
}

// opMetrics converts a mount's stats report: FUSE operations, and the owner requests
// fusefs counts as ops named owner_read and owner_write.
func opMetrics(r stats.Report) (fuse, owner []metrics.Op) {
	for _, o := range r.Ops {
		op := metrics.Op{Name: o.Name, Calls: o.Calls, Bytes: o.Bytes}
		if o.Latency != nil {
			op.Latency = &metrics.Histogram{Bounds: stats.LatencyBounds[:], Counts: o.Latency,
				Sum: time.Duration(o.Millis * 1e6)}
		}
		if name, ok := strings.CutPrefix(o.Name, "owner_"); ok {
			op.Name = name
			owner = append(owner, op)
		} else {
			fuse = append(fuse, op)
		}
	}
	return fuse, owner
}
