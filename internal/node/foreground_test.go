//go:build linux

package node_test

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/node"
	"github.com/peerfs/peerfs/internal/peertest"
)

// logTo sends a node's log to the test's log.
type logTo struct {
	t    *testing.T
	name string
}

func (w logTo) Write(p []byte) (int, error) {
	w.t.Logf("[%s] %s", w.name, strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// standalone makes the node of a foreground mount at dir for the home of pn.
func standalone(t *testing.T, pn *peertest.Node, dir string) *node.Node {
	t.Helper()
	n, err := node.New(node.Options{Paths: pn.Paths, Identity: pn.ID, Standalone: true,
		CacheDir: pn.Paths.MountCache(dir), Logger: slog.New(slog.NewTextHandler(logTo{t, pn.Name + "-fg"}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if n.Addr() != nil {
		t.Fatalf("a standalone node listens on %v", n.Addr())
	}
	return n
}

// serveMount runs ServeMount until the mount is up; the returned channel gets its result.
func serveMount(t *testing.T, ctx context.Context, n *node.Node, p api.MountParams) <-chan error {
	t.Helper()
	up := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- n.ServeMount(ctx, p, func(*api.MountInfo) { close(up) })
	}()
	select {
	case <-up:
	case err := <-done:
		t.Fatalf("ServeMount: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the foreground mount did not come up in 20 s")
	}
	t.Cleanup(func() { exec.Command("fusermount3", "-u", "-z", p.Dir).Run() }) // only if a test failed midway
	return done
}

// isMounted reports whether dir is a mount point, from /proc/self/mountinfo.
func isMounted(t *testing.T, dir string) bool {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && fields[4] == dir {
			return true
		}
	}
	return false
}

// eventuallyReads waits up to 5 s for path to hold want.
func eventuallyReads(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && string(b) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %q (%v), want %q", path, b, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestForegroundMountBesideDaemon: a foreground mount of the same home runs beside the
// daemon's mount: its own cache, its own link to the owner, and neither link displaces the
// other. Stopping it unmounts cleanly and leaves the daemon's mount working.
func TestForegroundMountBesideDaemon(t *testing.T) {
	t.Run("peer dials in", func(t *testing.T) { testForegroundBesideDaemon(t, false) })
	// Both dial: which link survives depends on the device IDs, random in each run.
	t.Run("both dial", func(t *testing.T) { testForegroundBesideDaemon(t, true) })
}

func testForegroundBesideDaemon(t *testing.T, ownerDials bool) {
	m := mountShare(t)
	if ownerDials {
		m.a.Update(func(f *config.File) error {
			f.Peers[0].Addr = m.b.Addr
			return nil
		})
	}
	since := func() time.Time {
		st, err := m.b.N.Status(context.Background())
		if err != nil || len(st.Peers) != 1 || !st.Peers[0].Connected {
			t.Fatalf("the daemon's link to the owner: %+v %v", st, err)
		}
		return st.Peers[0].Since
	}
	linkedAt := since()

	fgDir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := serveMount(t, ctx, standalone(t, m.b, fgDir), api.MountParams{Peer: "alpha", Share: "m", Dir: fgDir})

	if err := os.WriteFile(filepath.Join(fgDir, "fg.txt"), []byte("from the foreground"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventuallyReads(t, filepath.Join(m.share, "fg.txt"), "from the foreground")
	eventuallyReads(t, filepath.Join(m.mnt, "fg.txt"), "from the foreground")
	if err := os.WriteFile(filepath.Join(m.mnt, "daemon.txt"), []byte("from the daemon"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventuallyReads(t, filepath.Join(fgDir, "daemon.txt"), "from the daemon")
	if _, err := os.Stat(filepath.Join(m.b.Paths.MountCache(fgDir), "data")); err != nil {
		t.Errorf("the foreground mount's own cache: %v", err)
	}
	if got := since(); !ownerDials && !got.Equal(linkedAt) {
		t.Errorf("the daemon's link was replaced (connected since %v, then %v)", linkedAt, got)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeMount after cancel: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ServeMount did not return 20 s after cancel")
	}
	if isMounted(t, fgDir) {
		t.Fatal("still mounted after ServeMount returned")
	}
	if err := os.WriteFile(filepath.Join(m.mnt, "after.txt"), []byte("ok"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventuallyReads(t, filepath.Join(m.share, "after.txt"), "ok")
}

// TestForegroundMountUnmountedFromOutside: fusermount3 -u ends ServeMount without error.
func TestForegroundMountUnmountedFromOutside(t *testing.T) {
	needFUSE(t)
	a, b := peertest.Pair(t)
	a.Share("m", t.TempDir(), false, "beta")
	dir := t.TempDir()
	done := serveMount(t, context.Background(), standalone(t, b, dir), api.MountParams{Peer: "alpha", Share: "m", Dir: dir})
	if out, err := exec.Command("fusermount3", "-u", dir).CombinedOutput(); err != nil {
		t.Fatalf("fusermount3 -u: %v: %s", err, out)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeMount after fusermount3 -u: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ServeMount did not return 20 s after fusermount3 -u")
	}
}

// TestForegroundMountRefusals: what a foreground mount refuses before mounting, with the
// code the CLI turns into its exit status. No FUSE is needed: nothing gets that far.
func TestForegroundMountRefusals(t *testing.T) {
	a, b := peertest.Pair(t) // b has a's address; a has none for b
	a.Share("m", t.TempDir(), false, "beta")
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "f"), nil, 0o644)
	for _, c := range []struct {
		name string
		pn   *peertest.Node
		p    api.MountParams
		code string
		says string
	}{
		{"no address", a, api.MountParams{Peer: "beta", Share: "x", Dir: t.TempDir()}, api.CodePeerUnreachable, "--addr"},
		{"unknown peer", b, api.MountParams{Peer: "nobody", Share: "m", Dir: t.TempDir()}, api.CodeUnknownPeer, "peerfs peer add"},
		{"not empty", b, api.MountParams{Peer: "alpha", Share: "m", Dir: full}, api.CodeInvalid, "not empty"},
		{"missing", b, api.MountParams{Peer: "alpha", Share: "m", Dir: filepath.Join(full, "nope")}, api.CodeNotFound, "create it first"},
		{"relative", b, api.MountParams{Peer: "alpha", Share: "m", Dir: "rel"}, api.CodeInvalid, "absolute"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := standalone(t, c.pn, c.p.Dir).ServeMount(context.Background(), c.p, func(*api.MountInfo) {
				t.Error("mounted")
			})
			if api.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %v (code %s), want code %s saying %q", err, api.CodeOf(err), c.code, c.says)
			}
		})
	}
}

// TestForegroundMountFindsPeerByDiscovery: a foreground mount of a peer with no address and
// no relay finds it through LAN discovery (here on loopback) and serves its share; with
// discovery off as well, it is refused at once with what to do.
func TestForegroundMountFindsPeerByDiscovery(t *testing.T) {
	peertest.NeedFUSE(t)
	lo := loopbackName(t)
	a := peertest.StartWith(t, "alpha", "", discovering(lo))
	b := peertest.StartWith(t, "beta", "", discovering(lo))
	a.Trust(b, false)
	b.Trust(a, false)
	share := t.TempDir()
	os.WriteFile(filepath.Join(share, "f.txt"), []byte("found"), 0o644)
	a.Share("m", share, false, "beta")

	dir := t.TempDir()
	n, err := node.New(node.Options{Paths: b.Paths, Identity: b.ID, Standalone: true, Discovery: true, DiscoveryInterfaces: []string{lo},
		CacheDir: b.Paths.MountCache(dir), Logger: slog.New(slog.NewTextHandler(logTo{t, "beta-fg"}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := serveMount(t, ctx, n, api.MountParams{Peer: "alpha", Share: "m", Dir: dir})
	eventuallyReads(t, filepath.Join(dir, "f.txt"), "found")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ServeMount after cancel: %v", err)
	}

	// Discovery off, no address, no relay: nothing can find the peer.
	err = standalone(t, b, t.TempDir()).ServeMount(context.Background(), api.MountParams{Peer: "alpha", Share: "m", Dir: t.TempDir()}, nil)
	if api.CodeOf(err) != api.CodePeerUnreachable || !strings.Contains(err.Error(), "LAN discovery is off") {
		t.Fatalf("with nothing to find the peer: %v", err)
	}
}
