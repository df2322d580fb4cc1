package node

import "github.com/peerfs/peerfs/internal/metrics"

// mountMetrics reports nothing: a node on Windows has no mounts (mount_windows.go).
func (n *Node) mountMetrics() ([]metrics.Mount, *metrics.Cache) { return nil, nil }
