// Package metrics serves a node's counters in the Prometheus text format, with the standard
// Go client, on an HTTP listener of its own ("peerfs daemon --metrics ADDR"). It knows
// nothing of peerfs beyond Source: at every scrape it asks the Source for a Snapshot of
// counters the node keeps anyway (links, transfers, per-mount FUSE operations, the chunk
// cache) and turns it into metrics, so serving metrics adds no work to the hot paths.
// docs/METRICS.md lists every metric.
package metrics

import "time"

// Source gives the state to export. Metrics is called once per scrape, from the HTTP
// server's goroutine; it must be safe to call concurrently with everything else.
type Source interface {
	Metrics() Snapshot
}

// Snapshot is a node's state at one moment. Counters only grow while the process runs.
type Snapshot struct {
	Peers     []Peer
	Transfers []Transfers
	Mounts    []Mount
	Cache     *Cache // nil until a mount opened the chunk cache
}

// Peer is one trusted device and its links.
type Peer struct {
	Name      string
	Connected bool
	Links     int           // live links (usually one)
	RTT       time.Duration // of the link calls use, last measured; 0 when unknown
	// Frame bytes received and sent over every link to the peer since the node started.
	BytesIn, BytesOut uint64
}

// Transfers are the direct-mode transfers (pull, send) with one peer of one kind.
type Transfers struct {
	Peer, Kind   string
	Active       int
	Done, Failed int64
	Bytes        int64 // moved over the link by finished and running transfers
}

// Mount is one FUSE mount and its counters.
type Mount struct {
	Dir, Peer, Share string
	Ops              []Op             // FUSE operations
	Owner            []Op             // requests carrying data to or from the owner ("read", "write")
	Counters         map[string]int64 // named event counters (cache_hits, round_trips, ...)
}

// Op is one kind of operation: calls, bytes moved, and how long the timed calls took.
type Op struct {
	Name         string
	Calls, Bytes int64
	Latency      *Histogram // nil when no call was timed
}

// Histogram counts durations in buckets.
type Histogram struct {
	Bounds []time.Duration // upper bounds, ascending
	Counts []int64         // per bucket: Counts[i] up to Bounds[i]; one more for the rest
	Sum    time.Duration
}

// Cache is the chunk cache shared by the mounts.
type Cache struct {
	Bytes, Limit int64
	Files        int
}
