//go:build linux

package node_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peerfs/peerfs/internal/peertest"
	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/wire"
)

// TestMountOpsOverLink drives every request a mount makes over a real TLS link between two
// nodes, against a real share folder, and checks the owner's disk after each.
func TestMountOpsOverLink(t *testing.T) {
	a, b := peertest.Pair(t)
	dir, roDir := t.TempDir(), t.TempDir()
	host := func(p string) string { return filepath.Join(dir, p) }
	if err := os.WriteFile(host("a.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(host("sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(roDir, "r.txt"), []byte("read me"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.Share("m", dir, false, "beta")
	a.Share("ro", roDir, true, "beta")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := b.N.Session(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	p := remote.Peer{S: sess}
	wantErr := func(what string, err error, code wire.Errno) {
		t.Helper()
		if !errors.Is(err, code) {
			t.Errorf("%s: %v, want %v", what, err, code)
		}
	}
	readHost := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(host(path))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	// STATFS describes the owner's filesystem.
	st, err := p.Statfs(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	var hostfs unix.Statfs_t
	if err := unix.Statfs(dir, &hostfs); err != nil {
		t.Fatal(err)
	}
	if st.Bsize == 0 || st.Blocks != hostfs.Blocks || st.NameLen != uint32(hostfs.Namelen) {
		t.Errorf("STATFS = %+v, the owner's statfs %+v", st, hostfs)
	}

	// CREATE, then WRITE a full chunk and a tail after it.
	e, err := p.Create(ctx, "m", "new.bin", 0o640, wire.CreateExclusive)
	if err != nil || !e.IsRegular() || e.Size != 0 {
		t.Fatalf("CREATE: %+v, %v", e, err)
	}
	if fi, err := os.Lstat(host("new.bin")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("CREATE left %v, %v on the owner's disk", fi, err)
	}
	_, err = p.Create(ctx, "m", "new.bin", 0o640, wire.CreateExclusive)
	wantErr("exclusive CREATE of an existing file", err, wire.EEXIST)
	chunk := bytes.Repeat([]byte("0123456789abcdef"), wire.MaxChunk/16)
	w, err := p.Write(ctx, "m", "new.bin", 0, chunk)
	if err != nil || w.Entry.Size != wire.MaxChunk || w.Pre.Size != 0 {
		t.Fatalf("WRITE of a chunk: %+v, %v", w, err)
	}
	if w, err = p.Write(ctx, "m", "new.bin", wire.MaxChunk, []byte("tail")); err != nil || w.Entry.Size != wire.MaxChunk+4 || w.Pre.Size != wire.MaxChunk {
		t.Fatalf("WRITE of the tail: %+v, %v", w, err)
	}
	if got := readHost("new.bin"); got != string(chunk)+"tail" {
		t.Errorf("the owner holds %d bytes after the writes, want %d", len(got), wire.MaxChunk+4)
	}
	if _, err := p.Write(ctx, "m", "new.bin", 0, make([]byte, wire.MaxChunk+1)); err == nil {
		t.Error("WRITE of more than MaxChunk was sent")
	}
	_, err = p.Write(ctx, "m", "missing", 0, []byte("x"))
	wantErr("WRITE to a missing file", err, wire.ENOENT)

	// READDIR with inline data: small files come with their content.
	list, err := p.ReadDir(ctx, "m", "", 4096)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]wire.Entry{}
	for _, e := range list {
		byName[e.Name] = e
	}
	if e := byName["a.txt"]; !e.HasData || string(e.Data) != "hello" || e.Size != 5 {
		t.Errorf("a.txt in READDIR: %+v", e)
	}
	if e := byName["new.bin"]; e.HasData || e.Size != wire.MaxChunk+4 {
		t.Errorf("new.bin in READDIR: HasData %v size %d", e.HasData, e.Size)
	}

	// SETATTR: size, mode and mtime together; the reply is the Entry after the change.
	mtime := time.Date(2020, 2, 2, 2, 2, 2, 2, time.UTC)
	ch, err := p.SetAttr(ctx, wire.SetAttrReq{Share: "m", Path: "new.bin", Valid: wire.SetSize | wire.SetMode | wire.SetMtime,
		Size: 10, Mode: 0o600, MtimeNs: mtime.UnixNano()})
	e = ch.Entry
	if err != nil || e.Size != 10 || e.Mode&wire.ModePermMask != 0o600 || e.MtimeNs != mtime.UnixNano() || ch.Pre.Size != wire.MaxChunk+4 {
		t.Fatalf("SETATTR: %+v, %v", ch, err)
	}
	if fi, err := os.Lstat(host("new.bin")); err != nil || fi.Size() != 10 || fi.Mode().Perm() != 0o600 || !fi.ModTime().Equal(mtime) {
		t.Errorf("after SETATTR the owner has %v, %v", fi, err)
	}

	// FALLOCATE grows the file; FSYNC flushes it and the share root.
	if e, err := p.Fallocate(ctx, "m", "new.bin", 0, 0, 1<<20); err == nil {
		if fi, _ := os.Lstat(host("new.bin")); e.Size != 1<<20 || fi.Size() != 1<<20 {
			t.Errorf("FALLOCATE: Entry size %d, owner's size %d", e.Size, fi.Size())
		}
	} else if !errors.Is(err, wire.EOPNOTSUPP) {
		t.Errorf("FALLOCATE: %v", err)
	}
	_, err = p.Fallocate(ctx, "m", "new.bin", 0x04, 0, 1)
	wantErr("FALLOCATE with an unknown mode", err, wire.EOPNOTSUPP)
	for _, path := range []string{"new.bin", ""} {
		for _, dataOnly := range []bool{false, true} {
			if err := p.Fsync(ctx, "m", path, dataOnly); err != nil {
				t.Errorf("FSYNC %q %v: %v", path, dataOnly, err)
			}
		}
	}

	// LINK makes a second name for the same file.
	e, err = p.Link(ctx, "m", "a.txt", "sub/hard.txt")
	if err != nil || e.Nlink != 2 {
		t.Fatalf("LINK: %+v, %v", e, err)
	}
	fa, _ := os.Lstat(host("a.txt"))
	fh, _ := os.Lstat(host("sub/hard.txt"))
	if !os.SameFile(fa, fh) {
		t.Error("LINK did not make a hard link on the owner")
	}
	_, err = p.Link(ctx, "m", "sub", "sub2")
	wantErr("LINK of a directory", err, wire.EPERM)

	// RENAME: no-replace refuses, exchange swaps, a plain rename moves.
	if err := os.WriteFile(host("b.txt"), []byte("bee"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantErr("RENAME no-replace over a file", p.Rename(ctx, "m", "b.txt", "a.txt", wire.RenameNoReplace), wire.EEXIST)
	if readHost("a.txt") != "hello" || readHost("b.txt") != "bee" {
		t.Error("a refused RENAME changed the owner's files")
	}
	if err := p.Rename(ctx, "m", "b.txt", "a.txt", wire.RenameExchange); err != nil {
		t.Fatalf("RENAME exchange: %v", err)
	}
	if readHost("a.txt") != "bee" || readHost("b.txt") != "hello" {
		t.Errorf("after RENAME exchange: a.txt %q, b.txt %q", readHost("a.txt"), readHost("b.txt"))
	}
	if err := p.Rename(ctx, "m", "b.txt", "sub/moved.txt", 0); err != nil {
		t.Fatal(err)
	}
	if readHost("sub/moved.txt") != "hello" {
		t.Error("RENAME did not move b.txt")
	}
	wantErr("RENAME of a missing name", p.Rename(ctx, "m", "missing", "x", 0), wire.ENOENT)

	// Extended attributes, where the owner's filesystem has them.
	if unix.Setxattr(host("a.txt"), "user.probe", []byte("1"), 0) == nil {
		if err := p.SetXattr(ctx, "m", "a.txt", "user.comment", []byte("\x00v\xff"), wire.XattrCreate); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 16)
		if n, err := unix.Getxattr(host("a.txt"), "user.comment", buf); err != nil || string(buf[:n]) != "\x00v\xff" {
			t.Errorf("the owner holds user.comment = %q, %v", buf[:n], err)
		}
		if v, err := p.GetXattr(ctx, "m", "a.txt", "user.comment"); err != nil || string(v) != "\x00v\xff" {
			t.Errorf("GETXATTR = %q, %v", v, err)
		}
		names, err := p.ListXattr(ctx, "m", "a.txt")
		slices.Sort(names)
		if err != nil || !slices.Equal(names, []string{"user.comment", "user.probe"}) {
			t.Errorf("LISTXATTR = %q, %v", names, err)
		}
		if err := p.RemoveXattr(ctx, "m", "a.txt", "user.comment"); err != nil {
			t.Fatal(err)
		}
		_, err = p.GetXattr(ctx, "m", "a.txt", "user.comment")
		wantErr("GETXATTR of a removed attribute", err, wire.ENODATA)
		wantErr("SETXATTR outside user.", p.SetXattr(ctx, "m", "a.txt", "trusted.x", []byte("x"), 0), wire.EOPNOTSUPP)
	} else {
		t.Log("the test filesystem has no user extended attributes; xattr requests not checked")
	}

	// UNLINK and RMDIR.
	if err := p.Unlink(ctx, "m", "sub/hard.txt"); err != nil {
		t.Fatal(err)
	}
	wantErr("RMDIR of a non-empty directory", p.Rmdir(ctx, "m", "sub"), wire.ENOTEMPTY)
	wantErr("UNLINK of a directory", p.Unlink(ctx, "m", "sub"), wire.EISDIR)
	if err := p.Unlink(ctx, "m", "sub/moved.txt"); err != nil {
		t.Fatal(err)
	}
	if err := p.Rmdir(ctx, "m", "sub"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(host("sub")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sub still on the owner's disk: %v", err)
	}

	// A read-only share answers reads and refuses every change before touching disk.
	if list, err := p.ReadDir(ctx, "ro", "", 4096); err != nil || len(list) != 1 || string(list[0].Data) != "read me" {
		t.Errorf("READDIR of the read-only share: %+v, %v", list, err)
	}
	if _, err := p.Statfs(ctx, "ro"); err != nil {
		t.Errorf("STATFS of the read-only share: %v", err)
	}
	_, err = p.Create(ctx, "ro", "new", 0o644, 0)
	wantErr("CREATE on a read-only share", err, wire.EROFS)
	_, err = p.Write(ctx, "ro", "r.txt", 0, []byte("x"))
	wantErr("WRITE on a read-only share", err, wire.EROFS)
	wantErr("UNLINK on a read-only share", p.Unlink(ctx, "ro", "r.txt"), wire.EROFS)
	wantErr("RENAME on a read-only share", p.Rename(ctx, "ro", "r.txt", "s.txt", 0), wire.EROFS)
	_, err = p.SetAttr(ctx, wire.SetAttrReq{Share: "ro", Path: "r.txt", Valid: wire.SetSize})
	wantErr("SETATTR on a read-only share", err, wire.EROFS)
	wantErr("FSYNC on a read-only share", p.Fsync(ctx, "ro", "r.txt", false), wire.EROFS)
	if b, _ := os.ReadFile(filepath.Join(roDir, "r.txt")); string(b) != "read me" {
		t.Errorf("the read-only share changed: %q", b)
	}

	// Paths are refused at decoding or by os.Root, whatever the op.
	if err := os.Symlink("..", host("up")); err != nil {
		t.Fatal(err)
	}
	_, err = p.Create(ctx, "m", "../escape", 0o644, 0)
	wantErr("CREATE ../escape", err, wire.ErrnoPathRefused)
	_, err = p.Write(ctx, "m", "up/escape", 0, []byte("x"))
	wantErr("WRITE through a link out", err, wire.ErrnoPathRefused)
	wantErr("RENAME out through a link", p.Rename(ctx, "m", "a.txt", "up/escape", 0), wire.ErrnoPathRefused)
	_, err = p.Link(ctx, "m", "a.txt", "up/escape")
	wantErr("LINK out through a link", err, wire.ErrnoPathRefused)
	if _, err := os.Lstat(filepath.Join(filepath.Dir(dir), "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("something was created outside the share: %v", err)
	}
	// A request the decoder refuses is answered PROTOCOL, and the link stays up.
	bad := wire.RenameReq{Share: "m", From: "a.txt", To: "c", Flags: wire.RenameNoReplace | wire.RenameExchange}
	buf, err := sess.Call(ctx, wire.OpRename, bad.AppendTo(nil))
	buf.Release()
	wantErr("RENAME with both flags", err, wire.ErrnoProtocol)
	if _, err := p.Stat(ctx, "m", "a.txt"); err != nil {
		t.Errorf("the link did not survive a malformed request: %v", err)
	}
	var re *wire.RemoteError
	if _, err := p.Statfs(ctx, "nosuch"); !errors.As(err, &re) || re.Code != wire.ErrnoNoShare {
		t.Errorf("STATFS of an unknown share: %v", err)
	}
	if err := sess.Err(); err != nil {
		t.Errorf("the link went down: %v", err)
	}
}
