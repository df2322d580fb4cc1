//go:build linux

package node_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/peertest"
)

// TestMountKeepsReadingAcrossSwitchToDirect: a mount made through the relay keeps reading,
// byte for byte, while its link moves to a direct path (the peer's address becomes known);
// no read fails, and the relay's session ends.
func TestMountKeepsReadingAcrossSwitchToDirect(t *testing.T) {
	needFUSE(t)
	srv, u := startRelay(t)
	a, b := relayPair(t, u, true)
	share, mnt := t.TempDir(), t.TempDir()
	const files = 16
	for i := range files {
		peertest.WriteRandomFile(t, filepath.Join(share, "f"+string(rune('a'+i))), 1<<20, uint64(i+1))
	}
	a.Share("m", share, true, "beta")
	waitPath(t, b, "alpha", api.PathRelayed, 15*time.Second)
	peertest.Mount(t, a, b, "m", mnt)

	// Read every file again and again (each once from the owner, later ones from the
	// cache, which drops nothing) while the link switches.
	var reads, failures atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := "f" + string(rune('a'+i%files))
			got, err := os.ReadFile(filepath.Join(mnt, name))
			want, _ := os.ReadFile(filepath.Join(share, name))
			if err != nil || !bytes.Equal(got, want) {
				failures.Add(1)
				t.Errorf("read %s during the switch: %v (%d bytes)", name, err, len(got))
			}
			reads.Add(1)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	b.Update(func(f *config.File) error {
		f.PeerByName("alpha").Addr = a.Addr
		return nil
	})
	waitPath(t, b, "alpha", api.PathDirect, 15*time.Second)
	for deadline := time.Now().Add(15 * time.Second); srv.Stats().Active != 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("relay still holds %d sessions", srv.Stats().Active)
		}
	}
	// A file not read yet comes over the direct link.
	peertest.WriteRandomFile(t, filepath.Join(share, "late"), 1<<20, 99)
	before := srv.Stats().Bytes
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := os.ReadFile(filepath.Join(mnt, "late"))
		want, _ := os.ReadFile(filepath.Join(share, "late"))
		if err == nil && bytes.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("late file through the mount: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	<-done
	if got := srv.Stats().Bytes - before; got != 0 {
		t.Errorf("the relay carried %d bytes after the switch", got)
	}
	t.Logf("%d reads during the switch, %d failed", reads.Load(), failures.Load())
}
