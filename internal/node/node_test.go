package node_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/peertest"
	"github.com/peerfs/peerfs/internal/transport"
	"github.com/peerfs/peerfs/internal/wire"
)

// waitConnected waits until n sees peer connected and returns its status.
func waitConnected(t *testing.T, n *peertest.Node, peer string) api.PeerStatus {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := n.N.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range st.Peers {
			if p.Name == peer && p.Connected {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never saw %s connected: %+v", n.Name, peer, st.Peers)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTrustedPairConnects(t *testing.T) {
	a, b := peertest.Pair(t)
	for _, c := range []struct {
		n    *peertest.Node
		peer string
	}{{a, "beta"}, {b, "alpha"}} {
		p := waitConnected(t, c.n, c.peer)
		if p.TLS != "TLS 1.3" || p.KeyExch != "X25519MLKEM768" || p.Cipher == "" || p.Protocol != wire.VersionMax {
			t.Errorf("%s sees %s over %q %q %q v%d", c.n.Name, c.peer, p.TLS, p.Cipher, p.KeyExch, p.Protocol)
		}
	}
}

func TestUntrustedAndWrongPeerRefused(t *testing.T) {
	a, b := peertest.Pair(t)
	waitConnected(t, b, "alpha")

	// c trusts a, but a does not trust c.
	c := peertest.Start(t, "gamma", "")
	c.Trust(a, true)
	_, err := c.N.List(context.Background(), api.ListParams{Peer: "alpha"})
	if api.CodeOf(err) != api.CodeUntrusted {
		t.Fatalf("untrusted dial: %v (code %s), want %s", err, api.CodeOf(err), api.CodeUntrusted)
	}

	// d expects b's device at a's address.
	d := peertest.Start(t, "delta", "")
	d.Update(func(f *config.File) error {
		f.Peers = append(f.Peers, config.Peer{Name: "beta", ID: b.ID.ID, Addr: a.Addr})
		return nil
	})
	_, err = d.N.List(context.Background(), api.ListParams{Peer: "beta"})
	if api.CodeOf(err) != api.CodeUntrusted {
		t.Fatalf("wrong device at the address: %v, want %s", err, api.CodeOf(err))
	}
	st, _ := d.N.Status(context.Background())
	if st.Peers[0].Connected || st.Peers[0].LastError == "" {
		t.Fatalf("status of a refused peer: %+v", st.Peers[0])
	}

	// a still serves b.
	if _, err := b.N.List(context.Background(), api.ListParams{Peer: "alpha"}); err != nil {
		t.Fatal(err)
	}
}

func TestListAndShareVisibility(t *testing.T) {
	a, b := peertest.Pair(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hi"), 0o640)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink("hello.txt", filepath.Join(dir, "ln"))
	a.Share("docs", dir, true, "beta")
	a.Share("private", t.TempDir(), false) // nobody

	ctx := context.Background()
	res, err := b.N.List(ctx, api.ListParams{Peer: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Shares) != 1 || res.Shares[0].Name != "docs" || !res.Shares[0].ReadOnly {
		t.Fatalf("shares visible to beta: %+v", res.Shares)
	}
	res, err = b.N.List(ctx, api.ListParams{Peer: "alpha", Share: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 3 || res.Entries[0].Name != "hello.txt" || res.Entries[0].Size != 2 ||
		res.Entries[0].Mode&0o777 != 0o640 || res.Entries[1].Type != "symlink" || res.Entries[1].Target != "hello.txt" ||
		res.Entries[2].Type != "dir" {
		t.Fatalf("listing: %+v", res.Entries)
	}
	for _, c := range []struct {
		p    api.ListParams
		code string
	}{
		{api.ListParams{Peer: "alpha", Share: "private"}, api.CodeUnknownShare},
		{api.ListParams{Peer: "alpha", Share: "nosuch"}, api.CodeUnknownShare},
		{api.ListParams{Peer: "alpha", Share: "docs", Path: "missing"}, api.CodeNotFound},
		{api.ListParams{Peer: "nobody"}, api.CodeUnknownPeer},
	} {
		if _, err := b.N.List(ctx, c.p); api.CodeOf(err) != c.code {
			t.Errorf("%+v: %v, want code %s", c.p, err, c.code)
		}
	}
}

func pull(t *testing.T, n *peertest.Node, p api.PullParams) (*api.TransferResult, error) {
	t.Helper()
	return n.N.Pull(context.Background(), p, func(api.Event) {})
}

func TestPullLargeFile(t *testing.T) {
	size := int64(1 << 30)
	if testing.Short() {
		size = 64 << 20
	}
	a, b := peertest.Pair(t)
	src := t.TempDir()
	peertest.WriteRandomFile(t, filepath.Join(src, "big.bin"), size, 1)
	a.Share("data", src, true, "beta")
	dest := t.TempDir()
	res, err := pull(t, b, api.PullParams{Peer: "alpha", Share: "data", Path: "big.bin", Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != size || res.Files != 1 || res.Hash == "" {
		t.Fatalf("result %+v", res)
	}
	if !bytes.Equal(peertest.FileHash(t, filepath.Join(src, "big.bin")), peertest.FileHash(t, filepath.Join(dest, "big.bin"))) {
		t.Fatal("pulled file differs from the original")
	}
	t.Logf("pulled %d MiB in %.2fs: %.0f MiB/s", size>>20, res.Elapsed, res.Rate/(1<<20))
}

// TestPullAfterChangeInPlace: the owner remembers the hash of a file it sent whole, keyed by
// the file's change time; a change in place that keeps the size and puts the mtime back must
// still be pulled with its new hash, and the unchanged file pulled again verifies too.
func TestPullAfterChangeInPlace(t *testing.T) {
	a, b := peertest.Pair(t)
	src := t.TempDir()
	path := filepath.Join(src, "f.bin")
	peertest.WriteRandomFile(t, path, 4<<20, 3)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	a.Share("data", src, true, "beta")
	// Old enough for the first pull's hash to be remembered (serve.racyWindow).
	time.Sleep(1100 * time.Millisecond)
	pullTo := func(what string) {
		t.Helper()
		dest := t.TempDir()
		if _, err := pull(t, b, api.PullParams{Peer: "alpha", Share: "data", Path: "f.bin", Dest: dest}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !bytes.Equal(peertest.FileHash(t, path), peertest.FileHash(t, filepath.Join(dest, "f.bin"))) {
			t.Fatalf("%s: pulled file differs from the owner's", what)
		}
	}
	pullTo("first pull")
	pullTo("pull of the unchanged file")
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0x5a}, 4096), 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	pullTo("pull after a change in place with the old mtime")
}

func TestPullTree(t *testing.T) {
	files := 10000
	if testing.Short() {
		files = 1000
	}
	a, b := peertest.Pair(t)
	src := filepath.Join(t.TempDir(), "proj")
	peertest.MakeTree(t, src, files, 2)
	a.Share("proj", src, true, "beta")
	dest := t.TempDir()
	res, err := pull(t, b, api.PullParams{Peer: "alpha", Share: "proj", Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != files || res.Symlinks != 6 {
		t.Fatalf("result %+v", res)
	}
	want, got := peertest.TreeDigest(t, src), peertest.TreeDigest(t, filepath.Join(dest, "proj"))
	diffTrees(t, want, got)

	// A rerun finds everything in place and moves no file.
	res, err = pull(t, b, api.PullParams{Peer: "alpha", Share: "proj", Dest: dest})
	if err != nil || res.Skipped != files || res.Bytes != 0 {
		t.Fatalf("rerun: %+v, %v", res, err)
	}
}

func diffTrees(t *testing.T, want, got map[string]string) {
	t.Helper()
	bad := 0
	for p, w := range want {
		if g := got[p]; g != w && bad < 10 {
			t.Errorf("%s: got %q, want %q", p, g, w)
			bad++
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok && bad < 10 {
			t.Errorf("%s: unexpected in copy (%s)", p, got[p])
			bad++
		}
	}
}

// pullUntilInterrupted starts a pull and calls interrupt once more than 64 MiB arrived; it
// returns the pull's error.
func pullUntilInterrupted(t *testing.T, b *peertest.Node, p api.PullParams, interrupt func()) error {
	t.Helper()
	var fired atomic.Bool
	_, err := b.N.Pull(context.Background(), p, func(ev api.Event) {
		if ev.Bytes > 64<<20 && fired.CompareAndSwap(false, true) {
			go interrupt()
		}
	})
	if !fired.Load() {
		t.Fatal("pull finished before it could be interrupted")
	}
	return err
}

func TestPullResumesAfterOwnerKilled(t *testing.T) {
	size := int64(512 << 20)
	a, b := peertest.Pair(t)
	src := t.TempDir()
	peertest.WriteRandomFile(t, filepath.Join(src, "big.bin"), size, 3)
	a.Share("data", src, true, "beta")
	dest := t.TempDir()
	p := api.PullParams{Peer: "alpha", Share: "data", Path: "big.bin", Dest: dest}

	err := pullUntilInterrupted(t, b, p, a.Stop)
	if api.CodeOf(err) != api.CodePeerUnreachable {
		t.Fatalf("interrupted pull: %v (code %s), want %s", err, api.CodeOf(err), api.CodePeerUnreachable)
	}
	if _, err := os.Stat(filepath.Join(dest, "big.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a partial file is under the final name: %v", err)
	}
	part, err := os.Stat(filepath.Join(dest, ".big.bin.peerfs-part"))
	if err != nil || part.Size() == 0 || part.Size() >= size {
		t.Fatalf("part file after the interruption: %v, %v", part, err)
	}

	a.Restart()
	res, err := pull(t, b, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed < part.Size()-(32<<20) || res.Bytes+res.Resumed != size {
		t.Fatalf("rerun did not resume: %+v (part had %d bytes)", res, part.Size())
	}
	if !bytes.Equal(peertest.FileHash(t, filepath.Join(src, "big.bin")), peertest.FileHash(t, filepath.Join(dest, "big.bin"))) {
		t.Fatal("resumed file differs from the original")
	}
	if _, err := os.Stat(filepath.Join(dest, ".big.bin.peerfs-part")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("part file left behind")
	}
}

func TestPullResumesAfterConnectionCut(t *testing.T) {
	size := int64(384 << 20)
	a := peertest.Start(t, "alpha", "")
	b := peertest.Start(t, "beta", "")
	proxy := peertest.NewProxy(t, a.Addr)
	a.Trust(b, false)
	b.Update(func(f *config.File) error {
		f.Peers = append(f.Peers, config.Peer{Name: "alpha", ID: a.ID.ID, Addr: proxy.Addr()})
		return nil
	})
	src := t.TempDir()
	peertest.WriteRandomFile(t, filepath.Join(src, "big.bin"), size, 4)
	a.Share("data", src, true, "beta")
	dest := t.TempDir()
	p := api.PullParams{Peer: "alpha", Share: "data", Path: "big.bin", Dest: dest}

	if err := pullUntilInterrupted(t, b, p, proxy.CutAll); err == nil {
		t.Fatal("pull survived a cut connection without error")
	}
	res, err := pull(t, b, p) // the dial loop reconnects through the proxy
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed == 0 {
		t.Fatalf("rerun did not resume: %+v", res)
	}
	if !bytes.Equal(peertest.FileHash(t, filepath.Join(src, "big.bin")), peertest.FileHash(t, filepath.Join(dest, "big.bin"))) {
		t.Fatal("resumed file differs from the original")
	}
}

func TestSendTreeAndReadOnly(t *testing.T) {
	a, b := peertest.Pair(t)
	inbox, ro := t.TempDir(), t.TempDir()
	a.Share("inbox", inbox, false, "beta")
	a.Share("ro", ro, true, "beta")
	src := filepath.Join(t.TempDir(), "work")
	peertest.MakeTree(t, src, 500, 5)
	peertest.WriteRandomFile(t, filepath.Join(src, "big.bin"), 40<<20, 6)

	ctx := context.Background()
	res, err := b.N.Send(ctx, api.SendParams{Source: src, Peer: "alpha", Share: "inbox", Dir: ""}, func(api.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 501 {
		t.Fatalf("result %+v", res)
	}
	diffTrees(t, peertest.TreeDigest(t, src), peertest.TreeDigest(t, filepath.Join(inbox, "work")))

	res, err = b.N.Send(ctx, api.SendParams{Source: src, Peer: "alpha", Share: "inbox"}, func(api.Event) {})
	if err != nil || res.Skipped != 501 || res.Bytes != 0 {
		t.Fatalf("second send: %+v %v", res, err)
	}

	_, err = b.N.Send(ctx, api.SendParams{Source: src, Peer: "alpha", Share: "ro"}, func(api.Event) {})
	if api.CodeOf(err) != api.CodePermission {
		t.Fatalf("send into a read-only share: %v, want %s", err, api.CodePermission)
	}
	if entries, _ := os.ReadDir(ro); len(entries) != 0 {
		t.Fatalf("read-only share changed: %v", entries)
	}
}

// TestPathEscapesRefused checks that a peer cannot reach outside a share through the link, and
// that a pulled tree's outward symlinks stay links.
func TestPathEscapesRefused(t *testing.T) {
	a, b := peertest.Pair(t)
	base := t.TempDir()
	shareDir, outside := filepath.Join(base, "share"), filepath.Join(base, "outside")
	os.MkdirAll(shareDir, 0o755)
	os.MkdirAll(outside, 0o755)
	canary := filepath.Join(outside, "canary")
	os.WriteFile(canary, []byte("do not touch"), 0o644)
	old := time.Unix(1_500_000_000, 0)
	os.Chtimes(canary, old, old)
	os.Symlink("../outside", filepath.Join(shareDir, "out"))
	os.Symlink(outside, filepath.Join(shareDir, "abs"))
	os.WriteFile(filepath.Join(shareDir, "ok.txt"), []byte("fine"), 0o644)
	a.Share("s", shareDir, false, "beta")

	ctx := context.Background()
	dest := t.TempDir()
	for _, path := range []string{"out/canary", "abs/canary", "out"} {
		if _, err := pull(t, b, api.PullParams{Peer: "alpha", Share: "s", Path: path, Dest: dest}); path != "out" && api.CodeOf(err) != api.CodePathRefused {
			t.Errorf("pull %s: %v, want %s", path, err, api.CodePathRefused)
		}
		if _, err := b.N.List(ctx, api.ListParams{Peer: "alpha", Share: "s", Path: path + "/x"}); api.CodeOf(err) != api.CodePathRefused && api.CodeOf(err) != api.CodeNotFound {
			t.Errorf("ls %s/x: %v", path, err)
		}
	}
	for _, path := range []string{"../outside/canary", "/etc/passwd", "a/../../outside/canary", "x\x00y"} {
		if _, err := pull(t, b, api.PullParams{Peer: "alpha", Share: "s", Path: path, Dest: dest}); api.CodeOf(err) != api.CodePathRefused {
			t.Errorf("pull %q: %v, want %s", path, err, api.CodePathRefused)
		}
	}
	// Sending a tree whose links point outside creates links, never follows them.
	src := filepath.Join(t.TempDir(), "evil")
	os.MkdirAll(src, 0o755)
	os.Symlink(outside, filepath.Join(src, "escape"))
	if _, err := b.N.Send(ctx, api.SendParams{Source: src, Peer: "alpha", Share: "s"}, func(api.Event) {}); err != nil {
		t.Fatal(err)
	}
	// Pulling the whole share recreates "out" and "abs" as links.
	res, err := pull(t, b, api.PullParams{Peer: "alpha", Share: "s", Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	if res.Symlinks != 3 {
		t.Fatalf("pull of the share: %+v", res)
	}
	if target, err := os.Readlink(filepath.Join(dest, "s", "out")); err != nil || target != "../outside" {
		t.Fatalf("out: %q %v", target, err)
	}
	got, _ := os.ReadFile(canary)
	fi, _ := os.Stat(canary)
	entries, _ := os.ReadDir(outside)
	if string(got) != "do not touch" || !fi.ModTime().Equal(old) || len(entries) != 1 {
		t.Fatalf("the canary outside the share was touched: %q %v %d entries", got, fi.ModTime(), len(entries))
	}
}

// TestMalformedFrameClosesOnlyThatLink sends garbage over a real TLS link from a trusted
// device: that link closes with a logged reason and the daemon keeps serving its other peer.
func TestMalformedFrameClosesOnlyThatLink(t *testing.T) {
	a, b := peertest.Pair(t)
	waitConnected(t, b, "alpha")
	c := peertest.Start(t, "gamma", "")
	a.Trust(c, false)
	conn, err := transport.Dial(context.Background(), a.Addr, &transport.Config{Identity: c.ID, Trusted: func() []identity.DeviceID { return []identity.DeviceID{a.ID.ID} }}, a.ID.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("this is not a peerfs frame at all......"))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 4096)); err == nil {
		// HELLO may arrive first; the next read must see the close.
		buf := make([]byte, 4096)
		for err == nil {
			_, err = conn.Read(buf)
		}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("link stayed open after garbage")
	}
	if _, err := b.N.List(context.Background(), api.ListParams{Peer: "alpha"}); err != nil {
		t.Fatalf("other peer no longer served: %v", err)
	}
}
