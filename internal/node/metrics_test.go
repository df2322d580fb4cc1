package node_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/metrics"
	"github.com/peerfs/peerfs/internal/peertest"
	"github.com/peerfs/peerfs/internal/remote"
)

// scraper serves a node's metrics on loopback, as "peerfs daemon --metrics" does, and
// scrapes them over HTTP.
type scraper struct {
	t   *testing.T
	url string
}

func serveMetrics(t *testing.T, n *peertest.Node) *scraper {
	t.Helper()
	ln, err := metrics.Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- metrics.Serve(ctx, ln, n.N, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("metrics.Serve: %v", err)
		}
	})
	return &scraper{t: t, url: "http://" + ln.Addr().String() + metrics.Path}
}

type scrape map[string]*dto.MetricFamily

func (s *scraper) scrape() scrape {
	s.t.Helper()
	resp, err := http.Get(s.url)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET %s: %s", s.url, resp.Status)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return fams
}

// get returns the value of the sample of name whose labels include the given name=value
// pairs (a histogram's sample count); -1 if there is none.
func (sc scrape) get(name string, labels ...string) float64 {
	f := sc[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

// TestMetricsPull: a node's metrics endpoint shows its link to the peer, and a pull moves
// the byte and transfer counters.
func TestMetricsPull(t *testing.T) {
	a, b := peertest.Pair(t)
	dir := t.TempDir()
	a.Share("m", dir, true, "beta")
	const size = 3<<20 + 100
	peertest.WriteRandomFile(t, filepath.Join(dir, "f.bin"), size, 7)
	if _, err := b.N.Session(context.Background(), "alpha"); err != nil {
		t.Fatal(err)
	}
	s := serveMetrics(t, b)

	// The link's first RTT is measured right after it opens (a PING, then its PONG).
	for deadline := time.Now().Add(10 * time.Second); s.scrape().get("peerfs_peer_rtt_seconds", "peer", "alpha") <= 0; {
		if time.Now().After(deadline) {
			t.Fatal("no RTT for the link 10 s after it opened")
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := s.scrape()
	for _, name := range []string{"peerfs_peer_connected", "peerfs_peer_links", "peerfs_peer_rtt_seconds",
		"peerfs_peer_received_bytes_total", "peerfs_peer_sent_bytes_total", "peerfs_transfers_total",
		"peerfs_transfers_active", "peerfs_transfer_bytes_total", "go_goroutines", "process_cpu_seconds_total"} {
		if before.get(name, "peer", "alpha") < 0 && before.get(name) < 0 {
			t.Errorf("no metric %s", name)
		}
	}
	if v := before.get("peerfs_peer_connected", "peer", "alpha"); v != 1 {
		t.Errorf("peerfs_peer_connected{peer=alpha} = %v, want 1", v)
	}
	if v := before.get("peerfs_transfers_total", "peer", "alpha", "kind", "pull", "result", "ok"); v != 0 {
		t.Errorf("pulls before any: %v", v)
	}

	dest := filepath.Join(t.TempDir(), "f.bin")
	if _, err := b.N.Pull(context.Background(), api.PullParams{Peer: "alpha", Share: "m", Path: "f.bin", Dest: dest}, nil); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dest); err != nil || fi.Size() != size {
		t.Fatalf("pulled file: %v %v", fi, err)
	}
	// A pull of a missing file fails and counts as such.
	if _, err := b.N.Pull(context.Background(), api.PullParams{Peer: "alpha", Share: "m", Path: "nope", Dest: dest + ".2"}, nil); err == nil {
		t.Fatal("pull of a missing file succeeded")
	}

	after := s.scrape()
	if in := after.get("peerfs_peer_received_bytes_total", "peer", "alpha") - before.get("peerfs_peer_received_bytes_total", "peer", "alpha"); in < size {
		t.Errorf("received bytes grew by %v during a pull of %d bytes", in, size)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"peerfs_transfers_total", []string{"peer", "alpha", "kind", "pull", "result", "ok"}, 1},
		{"peerfs_transfers_total", []string{"peer", "alpha", "kind", "pull", "result", "error"}, 1},
		{"peerfs_transfers_total", []string{"peer", "alpha", "kind", "send", "result", "ok"}, 0},
		{"peerfs_transfers_active", []string{"peer", "alpha", "kind", "pull"}, 0},
		{"peerfs_transfer_bytes_total", []string{"peer", "alpha", "kind", "pull"}, size},
	} {
		if v := after.get(c.name, c.labels...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
}

// TestMetricsLinkBytesSurviveReconnect: a peer's byte counters do not go back when its link
// is replaced: the bytes of the old link stay counted.
func TestMetricsLinkBytesSurviveReconnect(t *testing.T) {
	a, b := peertest.Pair(t)
	dir := t.TempDir()
	a.Share("m", dir, true, "beta")
	peertest.WriteRandomFile(t, filepath.Join(dir, "f.bin"), 2<<20, 8)
	// The first link carries a pull, far more than the next one will.
	if _, err := b.N.Pull(context.Background(), api.PullParams{Peer: "alpha", Share: "m", Path: "f.bin",
		Dest: filepath.Join(t.TempDir(), "f.bin")}, nil); err != nil {
		t.Fatal(err)
	}
	s := serveMetrics(t, b)
	first := s.scrape().get("peerfs_peer_received_bytes_total", "peer", "alpha")
	if first < 2<<20 {
		t.Fatalf("received bytes after a pull of 2 MiB: %v", first)
	}
	a.Restart()
	// Wait for the new link: a call on the old one fails once it is seen closed.
	deadline := time.Now().Add(20 * time.Second)
	for {
		sess, err := b.N.Session(context.Background(), "alpha")
		if err == nil {
			if _, err = (remote.Peer{S: sess}).Shares(context.Background()); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new link after the peer restarted: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	second := s.scrape()
	if v := second.get("peerfs_peer_links", "peer", "alpha"); v != 1 {
		t.Fatalf("links after the reconnect: %v", v)
	}
	if v := second.get("peerfs_peer_received_bytes_total", "peer", "alpha"); v <= first {
		t.Errorf("received bytes went from %v to %v over a reconnect", first, v)
	}
}
