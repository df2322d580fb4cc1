//go:build linux

package node_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/peertest"
)

// TestDiskFull pulls into a small tmpfs: a disk_full error that says what to do, and nothing
// under the final name.
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	small := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", small).CombinedOutput(); err != nil {
		t.Skipf("cannot mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { syscall.Unmount(small, syscall.MNT_DETACH) })
	a, b := peertest.Pair(t)
	src := t.TempDir()
	peertest.WriteRandomFile(t, filepath.Join(src, "big.bin"), 32<<20, 7)
	a.Share("data", src, true, "beta")
	_, err := pull(t, b, api.PullParams{Peer: "alpha", Share: "data", Path: "big.bin", Dest: small})
	if api.CodeOf(err) != api.CodeDiskFull {
		t.Fatalf("pull into a full disk: %v (code %s)", err, api.CodeOf(err))
	}
	if _, err := os.Stat(filepath.Join(small, "big.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("partial file under the final name")
	}
}
