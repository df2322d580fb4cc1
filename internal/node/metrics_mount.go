//go:build !windows

package node

import (
	"slices"
	"strings"

	"github.com/peerfs/peerfs/internal/metrics"
)

// mountMetrics reports each mount's counters and the chunk cache (nil until a mount opened it).
func (n *Node) mountMetrics() ([]metrics.Mount, *metrics.Cache) {
	n.mounts.mu.Lock()
	defer n.mounts.mu.Unlock()
	var out []metrics.Mount
	for _, m := range n.mounts.byDir {
		if m == nil { // being mounted
			continue
		}
		rep := m.root.Stats()
		mm := metrics.Mount{Dir: m.info.Dir, Peer: m.info.Peer, Share: m.info.Share, Counters: rep.Counters}
		mm.Ops, mm.Owner = opMetrics(rep)
		out = append(out, mm)
	}
	slices.SortFunc(out, func(a, b metrics.Mount) int { return strings.Compare(a.Dir, b.Dir) })
	var c *metrics.Cache
	if st := n.mounts.cache; st != nil {
		c = &metrics.Cache{Limit: st.Limit()}
		c.Bytes, c.Files = st.Usage()
	}
	return out, c
}
