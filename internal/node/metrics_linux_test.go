package node_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/peertest"
)

// TestMetricsMountRead: reading a file through a mount moves the FUSE read counters and
// latency histogram, misses the cache and fetches from the owner the first time, and hits
// the cache the second (read with O_DIRECT, so it reaches the daemon again; without
// passthrough, so the daemon serves it).
func TestMetricsMountRead(t *testing.T) {
	m := mountShare(t, func(p *api.MountParams) { p.NoPassthrough = true })
	const size = 4<<20 + 100
	peertest.WriteRandomFile(t, filepath.Join(m.share, "f.bin"), size, 9)
	want, err := os.ReadFile(filepath.Join(m.share, "f.bin"))
	if err != nil {
		t.Fatal(err)
	}
	s := serveMetrics(t, m.b)
	mnt := []string{"mount", m.mnt}
	before := s.scrape()
	if v := before.get("peerfs_mount_info", "mount", m.mnt, "peer", "alpha", "share", "m"); v != 1 {
		t.Errorf("peerfs_mount_info for the mount = %v, want 1", v)
	}

	if got := cacheBypassingPages(t, filepath.Join(m.mnt, "f.bin")); !bytes.Equal(got, want) {
		t.Fatal("first read differs")
	}
	first := s.scrape()
	read := append([]string{"op", "read"}, mnt...)
	moved := func(name string, from, to scrape, labels ...string) float64 {
		return to.get(name, labels...) - max(from.get(name, labels...), 0)
	}
	for _, c := range []struct {
		name   string
		labels []string
		least  float64
	}{
		{"peerfs_fuse_requests_total", read, 1},
		{"peerfs_fuse_request_bytes_total", read, size},
		{"peerfs_fuse_request_duration_seconds", read, 1}, // its sample count
		{"peerfs_cache_misses_total", mnt, 1},
		{"peerfs_owner_request_bytes_total", read, size},
		{"peerfs_owner_round_trips_total", mnt, 1},
		{"peerfs_fuse_requests_total", append([]string{"op", "open"}, mnt...), 1},
	} {
		if d := moved(c.name, before, first, c.labels...); d < c.least {
			t.Errorf("first read: %s%v moved by %v, want at least %v", c.name, c.labels, d, c.least)
		}
	}
	if v := first.get("peerfs_cache_size_bytes"); v < size {
		t.Errorf("peerfs_cache_size_bytes %v after reading %d bytes", v, size)
	}

	if got := cacheBypassingPages(t, filepath.Join(m.mnt, "f.bin")); !bytes.Equal(got, want) {
		t.Fatal("second read differs")
	}
	second := s.scrape()
	if d := moved("peerfs_cache_hits_total", first, second, mnt...); d < 1 {
		t.Errorf("second read: cache hits moved by %v", d)
	}
	if d := moved("peerfs_owner_request_bytes_total", first, second, read...); d != 0 {
		t.Errorf("second read fetched %v bytes from the owner again", d)
	}
	if d := moved("peerfs_fuse_request_duration_seconds", first, second, read...); d < 1 {
		t.Errorf("second read: %v reads timed", d)
	}
}
