package metrics

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// namespace prefixes every peerfs metric.
const namespace = "peerfs"

// Descriptions of the metrics a Snapshot becomes. docs/METRICS.md lists them; the test
// TestDocsListEveryMetric keeps the two together.
var (
	peerConnected = desc("peer_connected", "1 while a link to the peer is up, else 0.", "peer")
	peerLinks     = desc("peer_links", "Live links to the peer (more than one while a peer's second process or a simultaneous dial keeps one).", "peer")
	peerRTT       = desc("peer_rtt_seconds", "Round-trip time of the link to the peer, as last measured by its keepalive; absent while unknown.", "peer")
	peerIn        = desc("peer_received_bytes_total", "Protocol frame bytes received from the peer, over all its links.", "peer")
	peerOut       = desc("peer_sent_bytes_total", "Protocol frame bytes sent to the peer, over all its links.", "peer")

	transfersDone   = desc("transfers_total", "Finished direct-mode transfers (pull, send), by result (ok, error).", "peer", "kind", "result")
	transfersActive = desc("transfers_active", "Direct-mode transfers running now.", "peer", "kind")
	transferBytes   = desc("transfer_bytes_total", "Bytes moved over the link by direct-mode transfers, running ones included.", "peer", "kind")

	mountInfo     = desc("mount_info", "1 for each mount: the peer and share mounted at a mount point.", "mount", "peer", "share")
	fuseRequests  = desc("fuse_requests_total", "FUSE operations served by the mount.", "mount", "op")
	fuseBytes     = desc("fuse_request_bytes_total", "Bytes moved by FUSE operations (read, write, xattr).", "mount", "op")
	fuseDuration  = desc("fuse_request_duration_seconds", "Time the daemon took to answer FUSE requests, from the request read to the reply ready.", "mount", "op")
	ownerRequests = desc("owner_requests_total", "Data chunks read from (read) or written to (write) the mount's owner.", "mount", "op")
	ownerBytes    = desc("owner_request_bytes_total", "Bytes read from (read) or written to (write) the mount's owner.", "mount", "op")
	cacheSize     = desc("cache_size_bytes", "Bytes of file contents held in the chunk cache.")
	cacheLimit    = desc("cache_limit_bytes", "Chunk cache size above which the least recently used files are evicted.")
	cacheFiles    = desc("cache_files", "File versions held in the chunk cache.")
)

// mountCounters are the mount's named counters, each a counter metric with the mount label;
// a counter not listed here is exported as peerfs_mount_NAME_total.
var mountCounters = map[string]*prometheus.Desc{
	"cache_hits":        desc("cache_hits_total", "Lookups, listings and reads the mount answered from its metadata replica or chunk cache.", "mount"),
	"cache_misses":      desc("cache_misses_total", "Reads and lookups the mount had to ask the owner for.", "mount"),
	"round_trips":       desc("owner_round_trips_total", "Requests the mount sent to the owner and waited for.", "mount"),
	"passthrough_opens": desc("passthrough_opens_total", "Opens of fully cached files served by FUSE passthrough (the kernel reads the cache file).", "mount"),
	"streams":           desc("streams_total", "Sequential read streams started from the owner.", "mount"),
	"stream_waits":      desc("stream_waits_total", "Reads that waited for a stream's data to arrive.", "mount"),
	"page_drops":        desc("page_drops_total", "Times the mount told the kernel to drop a file's cached pages (a change made elsewhere).", "mount"),
	"local_creates":     desc("local_creates_total", "Files created through the mount that reached the owner with their first data, with no round trip of their own.", "mount"),
	"journaled_changes": desc("journaled_changes_total", "Changes a journaling mount recorded in its journal and completed without waiting for the owner.", "mount"),
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
}

// collector turns a Source's Snapshot into metrics at every scrape. It describes nothing
// up front (an unchecked collector): a mount counter added later still shows.
type collector struct {
	src Source
}

func (c collector) Describe(chan<- *prometheus.Desc) {}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Metrics()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	for _, p := range s.Peers {
		up := 0.0
		if p.Connected {
			up = 1
		}
		gauge(peerConnected, up, p.Name)
		gauge(peerLinks, float64(p.Links), p.Name)
		if p.Connected && p.RTT > 0 {
			gauge(peerRTT, p.RTT.Seconds(), p.Name)
		}
		counter(peerIn, float64(p.BytesIn), p.Name)
		counter(peerOut, float64(p.BytesOut), p.Name)
	}
	for _, t := range s.Transfers {
		counter(transfersDone, float64(t.Done), t.Peer, t.Kind, "ok")
		counter(transfersDone, float64(t.Failed), t.Peer, t.Kind, "error")
		gauge(transfersActive, float64(t.Active), t.Peer, t.Kind)
		counter(transferBytes, float64(t.Bytes), t.Peer, t.Kind)
	}
	for _, m := range s.Mounts {
		gauge(mountInfo, 1, m.Dir, m.Peer, m.Share)
		for _, o := range m.Ops {
			counter(fuseRequests, float64(o.Calls), m.Dir, o.Name)
			counter(fuseBytes, float64(o.Bytes), m.Dir, o.Name)
			if h := o.Latency; h != nil {
				ch <- histogram(fuseDuration, h, m.Dir, o.Name)
			}
		}
		for _, o := range m.Owner {
			counter(ownerRequests, float64(o.Calls), m.Dir, o.Name)
			counter(ownerBytes, float64(o.Bytes), m.Dir, o.Name)
		}
		for _, name := range slices.Sorted(maps.Keys(m.Counters)) {
			d := mountCounters[name]
			if d == nil {
				d = desc("mount_"+sanitize(name)+"_total", fmt.Sprintf("Mount counter %s.", name), "mount")
			}
			counter(d, float64(m.Counters[name]), m.Dir)
		}
	}
	if c := s.Cache; c != nil {
		gauge(cacheSize, float64(c.Bytes))
		gauge(cacheLimit, float64(c.Limit))
		gauge(cacheFiles, float64(c.Files))
	}
}

// histogram converts h to a Prometheus histogram, whose buckets are cumulative.
func histogram(d *prometheus.Desc, h *Histogram, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var count uint64
	for i, n := range h.Counts {
		count += uint64(n)
		if i < len(h.Bounds) {
			buckets[h.Bounds[i].Seconds()] = count
		}
	}
	return prometheus.MustNewConstHistogram(d, count, h.Sum.Seconds(), buckets, labels...)
}

// sanitize makes name fit a metric name: letters, digits and underscores.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, name)
}
