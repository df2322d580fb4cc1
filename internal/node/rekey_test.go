//go:build linux

package node_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/node"
	"github.com/peerfs/peerfs/internal/peertest"
)

// TestRekeyKeepsPullAndMountWorking: with a link replaced every 2 MiB, a pull of a large file
// and reads through a mount keep working across several replacements, and status counts
// them; on the side that dialled the link (which replaces it) and on the other.
func TestRekeyKeepsPullAndMountWorking(t *testing.T) {
	t.Run("dialler", func(t *testing.T) { testRekeyKeepsPullAndMountWorking(t, true) })
	t.Run("accepting side", func(t *testing.T) { testRekeyKeepsPullAndMountWorking(t, false) })
}

func testRekeyKeepsPullAndMountWorking(t *testing.T, dialler bool) {
	needFUSE(t)
	a := peertest.StartWith(t, "alpha", "", func(o *node.Options) { o.RekeyBytes = 2 << 20 })
	b := peertest.StartWith(t, "beta", "", func(o *node.Options) { o.RekeyBytes = 2 << 20 })
	// b pulls and mounts from a; it dials the link (and renews it) or a does.
	if dialler {
		a.Trust(b, false)
		b.Trust(a, true)
	} else {
		b.Trust(a, false)
		a.Trust(b, true)
	}
	src := t.TempDir()
	size := int64(256 << 20)
	if testing.Short() {
		size = 48 << 20
	}
	peertest.WriteRandomFile(t, filepath.Join(src, "big.bin"), size, 1)
	const files = 24
	for i := range files {
		peertest.WriteRandomFile(t, filepath.Join(src, fmt.Sprintf("f%02d.bin", i)), 768<<10, uint64(10+i))
	}
	a.Share("data", src, true, "beta")
	mnt := t.TempDir()
	ctx := context.Background()
	if _, err := b.N.Mount(ctx, api.MountParams{Peer: "alpha", Share: "data", Dir: mnt}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.N.Unmount(context.Background(), api.UnmountParams{Dir: mnt}) })

	var wg sync.WaitGroup
	var pullErr error
	dest := t.TempDir()
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, pullErr = pull(t, b, api.PullParams{Peer: "alpha", Share: "data", Path: "big.bin", Dest: dest})
	}()
	for i := range files {
		name := fmt.Sprintf("f%02d.bin", i)
		got, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil {
			t.Fatalf("reading %s through the mount: %v", name, err)
		}
		want, _ := os.ReadFile(filepath.Join(src, name))
		if !bytes.Equal(got, want) {
			t.Fatalf("%s read through the mount differs from the owner's", name)
		}
		time.Sleep(50 * time.Millisecond) // let the key check see each step
	}
	wg.Wait()
	if pullErr != nil {
		t.Fatalf("pull across rekeys: %v", pullErr)
	}
	if !bytes.Equal(peertest.FileHash(t, filepath.Join(src, "big.bin")), peertest.FileHash(t, filepath.Join(dest, "big.bin"))) {
		t.Fatal("pulled file differs from the original")
	}
	st := waitConnected(t, b, "alpha")
	if !dialler {
		st = waitConnected(t, a, "beta") // the side that counts
	}
	if st.Rekeys < 3 {
		t.Fatalf("status shows %d rekeys after %d MiB through links renewed every 2 MiB, want at least 3", st.Rekeys, (size+files*768<<10)>>20)
	}
	t.Logf("%d rekeys", st.Rekeys)
	moved := st.BytesIn // beta's, which pulled
	if !dialler {
		moved = st.BytesOut // alpha's, which served
	}
	if moved < uint64(size) {
		t.Errorf("status shows %d bytes moved, less than the %d pulled: traffic of replaced links is lost", moved, size)
	}
	if lines := append(a.Logged("level=ERROR"), b.Logged("level=ERROR")...); len(lines) > 0 {
		t.Fatalf("errors logged: %q", lines)
	}
}

// TestRekeyAfterTime: a quiet link is replaced once it reaches its age limit.
func TestRekeyAfterTime(t *testing.T) {
	a := peertest.Start(t, "alpha", "")
	b := peertest.StartWith(t, "beta", "", func(o *node.Options) { o.RekeyAfter = 500 * time.Millisecond })
	a.Trust(b, false)
	b.Trust(a, true)
	waitConnected(t, b, "alpha")
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := waitConnected(t, b, "alpha")
		if st.Rekeys >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rekeys after 10 s with links renewed every 0.5 s", st.Rekeys)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := b.N.List(context.Background(), api.ListParams{Peer: "alpha"}); err != nil {
		t.Fatal(err)
	}
}

// TestKeyLimitClosesLink: the accepting side closes a link that reaches the hard limit,
// whatever runs on it, and the dialler links again.
func TestKeyLimitClosesLink(t *testing.T) {
	a := peertest.StartWith(t, "alpha", "", func(o *node.Options) { o.RekeyLimitBytes = 4 << 20 })
	b := peertest.Start(t, "beta", "")
	a.Trust(b, false)
	b.Trust(a, true)
	src := t.TempDir()
	peertest.WriteRandomFile(t, filepath.Join(src, "big.bin"), 64<<20, 1)
	a.Share("data", src, true, "beta")
	pull(t, b, api.PullParams{Peer: "alpha", Share: "data", Path: "big.bin", Dest: t.TempDir()}) // may be cut
	if !waitLogged(a, "key usage limit") {
		t.Fatal("alpha never closed the link at its key usage limit")
	}
	waitConnected(t, b, "alpha")
}

// TestKeyLimitClosesDrainingLink: a replaced link that a transfer keeps open is still
// closed at the hard limit.
func TestKeyLimitClosesDrainingLink(t *testing.T) {
	a := peertest.Start(t, "alpha", "")
	b := peertest.StartWith(t, "beta", "", func(o *node.Options) {
		o.RekeyBytes = 1 << 20
		o.RekeyLimitBytes = 8 << 20
	})
	a.Trust(b, false)
	b.Trust(a, true)
	src := t.TempDir()
	peertest.WriteRandomFile(t, filepath.Join(src, "big.bin"), 64<<20, 1)
	a.Share("data", src, true, "beta")
	pull(t, b, api.PullParams{Peer: "alpha", Share: "data", Path: "big.bin", Dest: t.TempDir()}) // cut at 8 MiB
	if !waitLogged(b, "key usage limit") {
		t.Fatal("beta never closed the draining link at its key usage limit")
	}
}

// waitLogged waits up to 5 s for n to log a line containing s. The limits are checked every
// 250 ms, so a pull on a fast machine can end before the check that closes its link.
func waitLogged(n *peertest.Node, s string) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if len(n.Logged(s)) > 0 {
			return true
		}
	}
	return false
}
