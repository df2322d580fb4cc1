//go:build linux

package node_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/peertest"
)

// rememberedDirs lists the directories of the mounts a home remembers.
func rememberedDirs(t *testing.T, pn *peertest.Node) []string {
	t.Helper()
	list, err := config.LoadMounts(pn.Paths)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, m := range list {
		dirs = append(dirs, m.Dir)
	}
	return dirs
}

// waitMounted waits up to 15 s for the node of pn to serve a mount at dir.
func waitMounted(t *testing.T, pn *peertest.Node, dir string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := pn.N.Mounts(context.Background())
		if err == nil && slices.ContainsFunc(res.Mounts, func(m api.MountInfo) bool { return m.Dir == dir }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not mounted again 15 s after the restart", dir)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMountRestoredAfterRestart: a daemon that stops keeps its mounts remembered and mounts
// them again when it starts; an unmount forgets.
func TestMountRestoredAfterRestart(t *testing.T) {
	m := mountShare(t, func(p *api.MountParams) { p.Blksize = 65536 })
	if got := rememberedDirs(t, m.b); !slices.Equal(got, []string{m.mnt}) {
		t.Fatalf("remembered %v, want [%s]", got, m.mnt)
	}
	fi, err := os.Stat(m.b.Paths.MountsFile())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mounts file: %v, mode %v", err, fi.Mode())
	}
	os.WriteFile(filepath.Join(m.share, "before.txt"), []byte("kept"), 0o644)

	m.b.Restart()
	waitMounted(t, m.b, m.mnt)
	eventuallyReads(t, filepath.Join(m.mnt, "before.txt"), "kept")
	res, _ := m.b.N.Mounts(context.Background())
	if res.Mounts[0].Blksize != 65536 {
		t.Errorf("restored with blksize %d, want the remembered 65536", res.Mounts[0].Blksize)
	}

	if err := m.b.N.Unmount(context.Background(), api.UnmountParams{Dir: m.mnt}); err != nil {
		t.Fatal(err)
	}
	if got := rememberedDirs(t, m.b); len(got) != 0 {
		t.Fatalf("still remembered after unmount: %v", got)
	}
}

// TestMountUnmountedFromOutsideIsForgotten: fusermount3 -u is the user's unmount too.
func TestMountUnmountedFromOutsideIsForgotten(t *testing.T) {
	m := mountShare(t)
	if out, err := exec.Command("fusermount3", "-u", m.mnt).CombinedOutput(); err != nil {
		t.Fatalf("fusermount3 -u: %v: %s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, _ := m.b.N.Mounts(context.Background())
		if len(rememberedDirs(t, m.b)) == 0 && len(res.Mounts) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still remembered 10 s after fusermount3 -u: %v", rememberedDirs(t, m.b))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRestoreWaitsForPeer: a remembered mount whose owner is away is mounted when the owner
// comes back; one the user unmounts meanwhile is forgotten and not mounted.
func TestRestoreWaitsForPeer(t *testing.T) {
	m := mountShare(t)
	other := t.TempDir()
	if _, err := m.b.N.Mount(context.Background(), api.MountParams{Peer: "alpha", Share: "m", Dir: other}); err != nil {
		t.Fatal(err)
	}
	m.a.Stop()
	m.b.Restart()
	if got := rememberedDirs(t, m.b); len(got) != 2 {
		t.Fatalf("remembered %v, want both mounts", got)
	}
	if err := m.b.N.Unmount(context.Background(), api.UnmountParams{Dir: other}); err != nil {
		t.Fatalf("unmount of a mount waiting for its peer: %v", err)
	}
	if got := rememberedDirs(t, m.b); !slices.Equal(got, []string{m.mnt}) {
		t.Fatalf("remembered %v, want [%s]", got, m.mnt)
	}
	os.WriteFile(filepath.Join(m.share, "back.txt"), []byte("back"), 0o644)
	m.a.Restart()
	waitMounted(t, m.b, m.mnt)
	eventuallyReads(t, filepath.Join(m.mnt, "back.txt"), "back")
	if isMounted(t, other) {
		t.Error("the forgotten mount was mounted")
	}
}

// TestMountOverDeadMount: a mount point left dead by a server that went away ("transport
// endpoint is not connected") is detached and mounted again. The FUSE connection is
// aborted through fusectl, as the kernel does when a daemon crashes.
func TestMountOverDeadMount(t *testing.T) {
	m := mountShare(t)
	var st unix.Stat_t
	if err := unix.Stat(m.mnt, &st); err != nil {
		t.Fatal(err)
	}
	abort := filepath.Join("/sys/fs/fuse/connections", strconv.FormatUint(uint64(unix.Minor(st.Dev)), 10), "abort")
	if err := os.WriteFile(abort, []byte("1"), 0o200); err != nil {
		t.Skipf("cannot abort the FUSE connection (%v): fusectl is needed", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := os.ReadDir(m.mnt)
		res, _ := m.b.N.Mounts(context.Background())
		if errors.Is(err, syscall.ENOTCONN) && len(res.Mounts) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mount point after the abort: %v, mounts %v", err, res.Mounts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	os.WriteFile(filepath.Join(m.share, "again.txt"), []byte("again"), 0o644)
	if _, err := m.b.N.Mount(context.Background(), api.MountParams{Peer: "alpha", Share: "m", Dir: m.mnt}); err != nil {
		t.Fatalf("mount over the dead mount: %v", err)
	}
	eventuallyReads(t, filepath.Join(m.mnt, "again.txt"), "again")
}
