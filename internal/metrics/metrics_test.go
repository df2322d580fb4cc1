package metrics

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

func TestCheckAddr(t *testing.T) {
	for _, c := range []struct {
		addr   string
		public bool
		ok     bool
	}{
		{"127.0.0.1:7463", false, true},
		{"127.0.0.2:7463", false, true},
		{"[::1]:7463", false, true},
		{"localhost:7463", false, true},
		{"127.0.0.1:0", false, true},
		{"0.0.0.0:7463", false, false},
		{":7463", false, false},
		{"[::]:7463", false, false},
		{"192.168.1.20:7463", false, false},
		{"example.org:7463", false, false},
		{"0.0.0.0:7463", true, true},
		{":7463", true, true},
		{"127.0.0.1", false, false},
		{"127.0.0.1:http", false, false},
		{"127.0.0.1:70000", false, false},
		{"127.0.0.1:", false, false},
	} {
		err := CheckAddr(c.addr, c.public)
		if (err == nil) != c.ok {
			t.Errorf("CheckAddr(%q, public %v) = %v, want ok %v", c.addr, c.public, err, c.ok)
		}
	}
	err := CheckAddr("0.0.0.0:7463", false)
	if !errors.Is(err, ErrNotLoopback) || !strings.Contains(err.Error(), "--metrics-public") ||
		!strings.Contains(err.Error(), "127.0.0.1:7463") {
		t.Errorf("refusal %q should say how to listen on loopback and how to opt in", err)
	}
}

func TestListenRefusesPublicAddress(t *testing.T) {
	if ln, err := Listen("0.0.0.0:0", false); err == nil {
		ln.Close()
		t.Fatal("listened on every interface without the opt-in")
	}
	ln, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
}

// fixed is a Source with a fixed snapshot: the conversion is tested on known numbers; the
// node's own snapshot is tested with real nodes (internal/node).
type fixed Snapshot

func (f fixed) Metrics() Snapshot { return Snapshot(f) }

// sample has one of everything.
var sample = Snapshot{
	Peers: []Peer{
		{Name: "laptop", Connected: true, Links: 1, RTT: 1500 * time.Microsecond, BytesIn: 1000, BytesOut: 2000},
		{Name: "nas", Connected: false},
	},
	Transfers: []Transfers{{Peer: "laptop", Kind: "pull", Active: 1, Done: 3, Failed: 1, Bytes: 12345}},
	Mounts: []Mount{{
		Dir: "/home/u/peers/laptop", Peer: "laptop", Share: "projects",
		Ops: []Op{
			{Name: "read", Calls: 4, Bytes: 4 << 20, Latency: &Histogram{
				Bounds: []time.Duration{time.Millisecond, 10 * time.Millisecond},
				Counts: []int64{2, 1, 1},
				Sum:    40 * time.Millisecond,
			}},
			{Name: "lookup", Calls: 7},
		},
		Owner:    []Op{{Name: "read", Calls: 2, Bytes: 2 << 20}},
		Counters: map[string]int64{"cache_hits": 5, "cache_misses": 2, "round_trips": 9, "new-thing": 1},
	}},
	Cache: &Cache{Bytes: 3 << 20, Limit: 10 << 30, Files: 2},
}

// scrape serves src on loopback and returns the parsed text exposition.
func scrape(t *testing.T, src Source) map[string]*dto.MetricFamily {
	t.Helper()
	ln, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, src, nil) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	resp, err := http.Get("http://" + ln.Addr().String() + Path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %s: %s", resp.Status, b)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value finds the sample of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s", name)
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	t.Fatalf("no %s with labels %v", name, want)
	return nil
}

func TestScrape(t *testing.T) {
	fams := scrape(t, fixed(sample))
	mnt := map[string]string{"mount": "/home/u/peers/laptop"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"peerfs_peer_connected", map[string]string{"peer": "laptop"}, 1},
		{"peerfs_peer_connected", map[string]string{"peer": "nas"}, 0},
		{"peerfs_peer_links", map[string]string{"peer": "laptop"}, 1},
		{"peerfs_peer_rtt_seconds", map[string]string{"peer": "laptop"}, 0.0015},
		{"peerfs_peer_received_bytes_total", map[string]string{"peer": "laptop"}, 1000},
		{"peerfs_peer_sent_bytes_total", map[string]string{"peer": "laptop"}, 2000},
		{"peerfs_transfers_total", map[string]string{"peer": "laptop", "kind": "pull", "result": "ok"}, 3},
		{"peerfs_transfers_total", map[string]string{"peer": "laptop", "kind": "pull", "result": "error"}, 1},
		{"peerfs_transfers_active", map[string]string{"peer": "laptop", "kind": "pull"}, 1},
		{"peerfs_transfer_bytes_total", map[string]string{"peer": "laptop", "kind": "pull"}, 12345},
		{"peerfs_mount_info", map[string]string{"mount": "/home/u/peers/laptop", "peer": "laptop", "share": "projects"}, 1},
		{"peerfs_fuse_requests_total", map[string]string{"mount": mnt["mount"], "op": "read"}, 4},
		{"peerfs_fuse_requests_total", map[string]string{"mount": mnt["mount"], "op": "lookup"}, 7},
		{"peerfs_fuse_request_bytes_total", map[string]string{"mount": mnt["mount"], "op": "read"}, 4 << 20},
		{"peerfs_owner_requests_total", map[string]string{"mount": mnt["mount"], "op": "read"}, 2},
		{"peerfs_owner_request_bytes_total", map[string]string{"mount": mnt["mount"], "op": "read"}, 2 << 20},
		{"peerfs_cache_hits_total", mnt, 5},
		{"peerfs_cache_misses_total", mnt, 2},
		{"peerfs_owner_round_trips_total", mnt, 9},
		{"peerfs_mount_new_thing_total", mnt, 1},
		{"peerfs_cache_size_bytes", nil, 3 << 20},
		{"peerfs_cache_limit_bytes", nil, 10 << 30},
		{"peerfs_cache_files", nil, 2},
	} {
		m := value(t, fams, c.name, c.labels)
		var got float64
		switch {
		case m.Counter != nil:
			got = m.Counter.GetValue()
		case m.Gauge != nil:
			got = m.Gauge.GetValue()
		}
		if got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if fams["peerfs_peer_rtt_seconds"] != nil && len(fams["peerfs_peer_rtt_seconds"].Metric) != 1 {
		t.Errorf("RTT shown for a peer not connected: %v", fams["peerfs_peer_rtt_seconds"])
	}
	h := value(t, fams, "peerfs_fuse_request_duration_seconds", map[string]string{"op": "read"}).Histogram
	if h.GetSampleCount() != 4 || h.GetSampleSum() != 0.04 || len(h.Bucket) != 3 ||
		h.Bucket[0].GetUpperBound() != 0.001 || h.Bucket[0].GetCumulativeCount() != 2 ||
		h.Bucket[1].GetUpperBound() != 0.01 || h.Bucket[1].GetCumulativeCount() != 3 ||
		!math.IsInf(h.Bucket[2].GetUpperBound(), 1) || h.Bucket[2].GetCumulativeCount() != 4 {
		t.Errorf("read latency histogram %v", h)
	}
	if fams["peerfs_fuse_request_duration_seconds"] != nil && len(fams["peerfs_fuse_request_duration_seconds"].Metric) != 1 {
		t.Error("a histogram for an op never timed")
	}
	for _, std := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if fams[std] == nil && (std == "go_goroutines" || runtime.GOOS == "linux") {
			t.Errorf("standard metric %s missing", std)
		}
	}
}

func TestScrapeEmptyNode(t *testing.T) {
	fams := scrape(t, fixed(Snapshot{}))
	for name := range fams {
		if strings.HasPrefix(name, "peerfs_") {
			t.Errorf("a node with nothing to report shows %s", name)
		}
	}
}
