// Package peertest is the test harness for two-peer tests: it starts real nodes on loopback,
// each with its own home, identity, config and TLS listener, trusts them to each other and
// creates shares with generated content. Tests only.
package peertest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/node"
)

// Node is one running device in a test.
type Node struct {
	Name  string
	Home  string
	Paths config.Paths
	ID    *identity.Identity
	N     *node.Node
	Addr  string

	t      testing.TB
	mu     sync.Mutex // guards cancel and done: tests stop nodes from other goroutines
	cancel context.CancelFunc
	done   chan struct{}
}

// Start creates a home under dir and starts a node listening on 127.0.0.1 (port 0 unless
// listen is given).
func Start(t testing.TB, name, listen string) *Node {
	t.Helper()
	home := filepath.Join(t.TempDir(), name)
	paths, err := config.ResolvePaths(home)
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Save(paths.IdentityDir()); err != nil {
		t.Fatal(err)
	}
	if err := config.Create(paths, &config.File{Name: name}); err != nil {
		t.Fatal(err)
	}
	n := &Node{Name: name, Home: home, Paths: paths, ID: id, t: t}
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	n.start(listen)
	t.Cleanup(n.Stop)
	return n
}

func (n *Node) start(listen string) {
	n.t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{n.t, n.Name}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	nd, err := node.New(node.Options{Paths: n.Paths, Identity: n.ID, Listen: listen, Logger: log})
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	n.mu.Lock()
	n.N, n.Addr, n.cancel, n.done = nd, nd.Addr().String(), cancel, done
	n.mu.Unlock()
	go func() {
		defer close(done)
		nd.Run(ctx)
	}()
}

// Stop stops the node (like a daemon killed: links drop, part files stay). Safe to repeat.
func (n *Node) Stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cancel != nil {
		n.cancel()
		<-n.done
		n.cancel = nil
	}
}

// Restart starts the node again on the same address with the same home.
func (n *Node) Restart() {
	n.Stop()
	n.start(n.Addr)
}

// Trust adds other as a trusted peer named other.Name (with its address when dial is set) and
// reloads the running node.
func (n *Node) Trust(other *Node, dial bool) {
	n.t.Helper()
	addr := ""
	if dial {
		addr = other.Addr
	}
	n.Update(func(f *config.File) error {
		f.Peers = append(f.Peers, config.Peer{Name: other.Name, ID: other.ID.ID, Addr: addr})
		return nil
	})
}

// Share exports dir as name to the named peers.
func (n *Node) Share(name, dir string, readOnly bool, peers ...string) {
	n.t.Helper()
	n.Update(func(f *config.File) error {
		f.Shares = append(f.Shares, config.Share{Name: name, Path: dir, ReadOnly: readOnly, Peers: peers})
		return nil
	})
}

// Update edits the config and reloads the node.
func (n *Node) Update(fn func(*config.File) error) {
	n.t.Helper()
	if err := config.Update(n.Paths, fn); err != nil {
		n.t.Fatal(err)
	}
	if err := n.N.Reload(context.Background()); err != nil {
		n.t.Fatal(err)
	}
}

// Pair starts two nodes, a and b, trusted to each other; b knows a's address and dials it.
func Pair(t testing.TB) (a, b *Node) {
	a = Start(t, "alpha", "")
	b = Start(t, "beta", "")
	a.Trust(b, false)
	b.Trust(a, true)
	return a, b
}

type testWriter struct {
	t    testing.TB
	name string
}

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("[%s] %s", w.name, p[:len(p)-1])
	return len(p), nil
}

// WriteRandomFile writes size pseudo-random bytes (seeded) to path.
func WriteRandomFile(t testing.TB, path string, size int64, seed uint64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16)})
	if _, err := io.CopyN(f, r, size); err != nil {
		t.Fatal(err)
	}
}

// MakeTree writes files small files spread over nested directories under root, with a few
// symlinks and varied modes and mtimes, and returns how many bytes the files hold.
func MakeTree(t testing.TB, root string, files int, seed uint64) int64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var total int64
	buf := make([]byte, 64<<10)
	for i := 0; i < files; i++ {
		dir := filepath.Join(root, fmt.Sprintf("d%02d", i%37), fmt.Sprintf("s%02d", i%11))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		n := rng.IntN(8 << 10)
		if i%500 == 0 {
			n = 40<<10 + rng.IntN(20<<10)
		}
		for j := range buf[:n] {
			buf[j] = byte(rng.Uint32())
		}
		p := filepath.Join(dir, fmt.Sprintf("f%05d.dat", i))
		mode := fs.FileMode(0o644)
		if i%7 == 0 {
			mode = 0o600
		}
		if i%13 == 0 {
			mode = 0o755
		}
		if err := os.WriteFile(p, buf[:n], mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		mt := time.Unix(1_600_000_000+int64(rng.IntN(100_000_000)), int64(rng.IntN(1e9)))
		os.Chtimes(p, mt, mt)
		total += int64(n)
	}
	for i := 0; i < 5; i++ {
		os.Symlink(fmt.Sprintf("../s%02d/f%05d.dat", i, i), filepath.Join(root, "d00", fmt.Sprintf("link%d", i)))
	}
	os.Symlink("/nonexistent/absolute/target", filepath.Join(root, "dangling"))
	os.Mkdir(filepath.Join(root, "empty"), 0o700)
	return total
}

// TreeDigest describes a tree: every path with its type, mode, size, mtime (files and
// directories), symlink target and content hash, so two trees compare equal exactly when a
// copy kept all of it. Part files are included, so a leftover one makes trees differ.
func TreeDigest(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		case fi.IsDir():
			if rel == "." {
				return nil // the top's name and times are the caller's business
			}
			out[rel] = fmt.Sprintf("dir %v %d", fi.Mode().Perm(), fi.ModTime().UnixNano())
		default:
			out[rel] = fmt.Sprintf("file %v %d %d %x", fi.Mode().Perm(), fi.Size(), fi.ModTime().UnixNano(), FileHash(t, p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FileHash returns the SHA-256 of a file (an independent hash from the one transfers use).
func FileHash(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return h.Sum(nil)
}

// NeedFUSE skips a test on machines that cannot mount: without /dev/fuse or fusermount3.
func NeedFUSE(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse: mount tests need FUSE (load the fuse module)")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("fusermount3 not found: install fuse3 (make deps)")
	}
}

// Mount has peer mount owner's share at dir (which must exist), with params edited by
// each of params, and unmounts it at the end of the test.
func Mount(t testing.TB, owner, peer *Node, share, dir string, params ...func(*api.MountParams)) {
	t.Helper()
	p := api.MountParams{Peer: owner.Name, Share: share, Dir: dir}
	for _, f := range params {
		f(&p)
	}
	if _, err := peer.N.Mount(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := peer.N.Unmount(context.Background(), api.UnmountParams{Dir: dir}); err != nil && api.CodeOf(err) != api.CodeNotFound {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}
