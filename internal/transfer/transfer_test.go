//go:build unix

package transfer

import (
	"bytes"
	"context"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/peerfs/peerfs/internal/rootfs"
	"github.com/peerfs/peerfs/internal/sharetest"
)

// The tests below pull from and send to a real share served over TLS on loopback TCP
// (servePeer), with files of a few chunks so that chunks are many and resumes meet them.

// content returns n reproducible pseudo-random bytes.
func content(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// fileSize is three whole chunks and a bit: the last chunk is short.
const fileSize = 3<<20 + 12345

// makeTree fills dir: a large file, small ones in nested directories, an empty one, a symlink,
// and modes and mtimes of their own.
func makeTree(t *testing.T, dir string) {
	t.Helper()
	sharetest.Mkdirs(t, dir, filepath.Join(dir, "sub"), filepath.Join(dir, "sub", "deep"))
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), content(fileSize, 1), 0o600); err != nil {
		t.Fatal(err)
	}
	sharetest.WriteFile(t, filepath.Join(dir, "sub", "b.txt"), "bee", 0o640)
	sharetest.WriteFile(t, filepath.Join(dir, "sub", "deep", "empty"), "", 0o604)
	if err := os.Symlink("sub/b.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(dir, "sub", "deep"), filepath.Join(dir, "sub"), dir} {
		if err := os.Chmod(d, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(d, sharetest.OldTime, sharetest.OldTime); err != nil {
			t.Fatal(err)
		}
	}
}

// sameTree fails unless the trees at a and b hold the same names, types, modes, sizes,
// contents, link targets and mtimes (but a symlink's own, which a copy does not keep).
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	norm := func(m map[string]sharetest.FileState) map[string]sharetest.FileState {
		for k, v := range m {
			v.Ctime = 0
			if v.Mode&fs.ModeSymlink != 0 {
				v.Mtime = 0
			}
			m[k] = v
		}
		return m
	}
	sharetest.SameSnapshot(t, "copy", norm(sharetest.Snapshot(t, a)), norm(sharetest.Snapshot(t, b)))
}

// noParts fails if a part file is left anywhere under dir.
func noParts(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && rootfs.IsPartName(d.Name()) {
			t.Errorf("part file left: %s", p)
		}
		return nil
	})
}

func TestPullFile(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	data := content(fileSize, 2)
	if err := os.WriteFile(filepath.Join(src, "f.bin"), data, 0o640); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(filepath.Join(src, "f.bin"), sharetest.OldTime, sharetest.OldTime)
	res, err := Pull(context.Background(), servePeer(t, "s", src), "s", "f.bin", dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dst, "f.bin"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("pulled file differs (%d bytes, err %v)", len(got), err)
	}
	if sum := blake3.Sum256(data); !bytes.Equal(res.Hash, sum[:]) {
		t.Errorf("Hash %x, want %x", res.Hash, sum)
	}
	if res.Files != 1 || res.Bytes != fileSize || res.Resumed != 0 || res.Dest != filepath.Join(dst, "f.bin") {
		t.Errorf("result %+v", res)
	}
	fi, _ := os.Stat(filepath.Join(dst, "f.bin"))
	if fi.Mode().Perm() != 0o640 || !fi.ModTime().Equal(sharetest.OldTime) {
		t.Errorf("mode %v mtime %v, want 0640 and %v", fi.Mode(), fi.ModTime(), sharetest.OldTime)
	}
	noParts(t, dst)
}

// TestPullResumes: a part file left by an interrupted pull is kept and completed: only the
// rest moves, and the whole still verifies. A part that does not match the owner's file is
// thrown away and the file copied afresh.
func TestPullResumes(t *testing.T) {
	for _, tt := range []struct {
		name    string
		part    func(data []byte) []byte
		resumed int64
	}{
		{"matching part", func(data []byte) []byte { return data[:1<<20] }, 1 << 20},
		{"corrupt part", func([]byte) []byte { return make([]byte, 1<<20) }, 1 << 20},
		{"part longer than the file", func(data []byte) []byte { return append(bytes.Clone(data), 1, 2, 3) }, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src, dst := t.TempDir(), t.TempDir()
			data := content(fileSize, 3)
			if err := os.WriteFile(filepath.Join(src, "f.bin"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			part := filepath.Join(dst, rootfs.PartName("", "f.bin"))
			if err := os.WriteFile(part, tt.part(data), 0o600); err != nil {
				t.Fatal(err)
			}
			res, err := Pull(context.Background(), servePeer(t, "s", src), "s", "f.bin", dst, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(dst, "f.bin")); !bytes.Equal(got, data) {
				t.Fatal("resumed pull gave other contents")
			}
			if res.Resumed != tt.resumed {
				t.Errorf("Resumed %d, want %d", res.Resumed, tt.resumed)
			}
			noParts(t, dst)
		})
	}
}

// TestPullTree copies a tree with its modes, mtimes and symlink, then pulls it again: every
// file is already there and skipped, and nothing moves.
func TestPullTree(t *testing.T) {
	share, dst := t.TempDir(), t.TempDir()
	makeTree(t, filepath.Join(share, "tree"))
	peer := servePeer(t, "s", share)
	res, err := Pull(context.Background(), peer, "s", "tree", dst, Options{Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	sameTree(t, filepath.Join(share, "tree"), filepath.Join(dst, "tree"))
	if res.Files != 3 || res.Dirs != 3 || res.Symlinks != 1 || res.Bytes != fileSize+3 {
		t.Errorf("result %+v", res)
	}
	noParts(t, dst)
	again, err := Pull(context.Background(), peer, "s", "tree", dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Skipped != 3 || again.Bytes != 0 {
		t.Errorf("second pull moved %d bytes and skipped %d of 3 files", again.Bytes, again.Skipped)
	}
	sameTree(t, filepath.Join(share, "tree"), filepath.Join(dst, "tree"))
}

// TestSendTree sends a tree into a folder of the share: the owner holds the same tree, and
// a second send skips every file.
func TestSendTree(t *testing.T) {
	src, share := t.TempDir(), t.TempDir()
	makeTree(t, filepath.Join(src, "tree"))
	sharetest.Mkdirs(t, filepath.Join(share, "in"))
	peer := servePeer(t, "s", share)
	res, err := Send(context.Background(), peer, filepath.Join(src, "tree"), "s", "in", Options{Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	sameTree(t, filepath.Join(src, "tree"), filepath.Join(share, "in", "tree"))
	if res.Files != 3 || res.Bytes != fileSize+3 || !strings.HasSuffix(res.Dest, "tree") {
		t.Errorf("result %+v", res)
	}
	noParts(t, share)
	again, err := Send(context.Background(), peer, filepath.Join(src, "tree"), "s", "in", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Skipped != 3 || again.Bytes != 0 {
		t.Errorf("second send moved %d bytes and skipped %d of 3 files", again.Bytes, again.Skipped)
	}
}
