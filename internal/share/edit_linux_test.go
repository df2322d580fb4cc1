package share

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peerfs/peerfs/internal/wire"
)

// umask returns the process umask, which the owner applies to created files.
func umask() fs.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return fs.FileMode(m)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func lstatHost(t *testing.T, path string) fs.FileInfo {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// sameEntry fails unless e describes what the host's lstat of path says.
func sameEntry(t *testing.T, what string, e wire.Entry, path string) {
	t.Helper()
	want, ok := rawEntry(lstatHost(t, path))
	if !ok {
		return
	}
	if e.Mode != want.Mode || e.Size != want.Size || e.Ino != want.Ino || e.Nlink != want.Nlink || e.MtimeNs != want.MtimeNs {
		t.Errorf("%s: Entry %+v, host says mode %o size %d ino %d nlink %d mtime %d", what, e, want.Mode, want.Size, want.Ino, want.Nlink, want.MtimeNs)
	}
}

func TestCreate(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	host := func(p string) string { return filepath.Join(fx.shareDir, p) }

	e, err := s.Create("new.txt", 0o6777, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := fs.FileMode(0o777); lstatHost(t, host("new.txt")).Mode() != want {
		t.Errorf("new.txt mode %v, want %v: set-id bits dropped, the owner's umask not applied", lstatHost(t, host("new.txt")).Mode(), want)
	}
	// The mode asked for, exactly, whatever the owner's umask: 0000 stays 0000.
	for _, mode := range []uint32{0, 0o640, 0o777} {
		name := fmt.Sprintf("mode%o", mode)
		if _, err := s.Create(name, mode, wire.CreateExclusive); err != nil {
			t.Fatal(err)
		}
		if got := lstatHost(t, host(name)).Mode(); got != fs.FileMode(mode) {
			t.Errorf("created with mode %#o: %v", mode, got)
		}
	}
	if e.Name != "" || !e.IsRegular() || e.Size != 0 {
		t.Errorf("Entry of a new file: %+v", e)
	}
	sameEntry(t, "Create", e, host("new.txt"))

	// An existing file is opened, not emptied, unless asked.
	if e, err := s.Create("a.txt", 0o600, 0); err != nil || e.Size != 5 || readFile(t, host("a.txt")) != "hello" {
		t.Errorf("Create of an existing file: %+v, %v", e, err)
	}
	if lstatHost(t, host("a.txt")).Mode() != 0o640 {
		t.Error("Create of an existing file changed its mode")
	}
	wantCode(t, "Create exclusive of an existing file", func() error { _, err := s.Create("a.txt", 0o600, wire.CreateExclusive); return err }(), wire.EEXIST)
	if e, err := s.Create("a.txt", 0o600, wire.CreateTruncate); err != nil || e.Size != 0 || readFile(t, host("a.txt")) != "" {
		t.Errorf("Create with truncate: %+v, %v", e, err)
	}
	if _, err := s.Create("sub/excl", 0o640, wire.CreateExclusive|wire.CreateTruncate); err != nil {
		t.Error(err)
	}
	// Through a link inside the share, the target is opened.
	if _, err := s.Create("sub/up", 0o600, wire.CreateTruncate); err != nil || lstatHost(t, host("sub/up")).Mode().Type() != fs.ModeSymlink {
		t.Errorf("Create through sub/up: %v", err)
	}

	create := func(p string, flags uint32) error { _, err := s.Create(p, 0o644, flags); return err }
	wantCode(t, "Create of a directory", create("sub", 0), wire.EISDIR)
	wantCode(t, "Create of the share root", create("", 0), wire.EISDIR)
	wantCode(t, "Create in a missing directory", create("missing/x", 0), wire.ENOENT)
	wantCode(t, "Create under a file", create("a.txt/x", 0), wire.ENOTDIR)
	wantCode(t, "Create unknown flags", create("x", 1<<7), wire.EINVAL)
	if _, err := os.Lstat(host("x")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("Create with unknown flags created the file")
	}
}

// CreateWith creates and writes the first data in one call, and sets the times asked for;
// an exclusive create of a taken name writes nothing.
func TestCreateWith(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	host := func(p string) string { return filepath.Join(fx.shareDir, p) }

	e, err := s.CreateWith(wire.CreateReq{Path: "new.txt", Mode: 0o644, Flags: wire.CreateExclusive | wire.CreateWithData,
		Offset: 3, Data: []byte("abc")})
	if err != nil || e.Size != 6 || readFile(t, host("new.txt")) != "\x00\x00\x00abc" {
		t.Fatalf("CreateWith data at 3: %+v, %v", e, err)
	}
	sameEntry(t, "CreateWith", e, host("new.txt"))

	wantCode(t, "CreateWith exclusive of a taken name", func() error {
		_, err := s.CreateWith(wire.CreateReq{Path: "a.txt", Mode: 0o644, Flags: wire.CreateExclusive | wire.CreateWithData, Data: []byte("mine")})
		return err
	}(), wire.EEXIST)
	if readFile(t, host("a.txt")) != "hello" {
		t.Fatal("an exclusive CreateWith of a taken name wrote into it")
	}
	// Truncating, the file holds exactly the data.
	if e, err := s.CreateWith(wire.CreateReq{Path: "a.txt", Flags: wire.CreateTruncate | wire.CreateWithData, Data: []byte("hi")}); err != nil ||
		e.Size != 2 || readFile(t, host("a.txt")) != "hi" {
		t.Fatalf("CreateWith truncating: %+v, %v", e, err)
	}

	mtime := time.Date(2024, 2, 29, 12, 0, 0, 123456789, time.UTC)
	e, err = s.CreateWith(wire.CreateReq{Path: "empty", Mode: 0o600, Flags: wire.CreateExclusive | wire.CreateSetTimes,
		AtimeNs: mtime.UnixNano(), MtimeNs: mtime.UnixNano()})
	if err != nil || e.MtimeNs != mtime.UnixNano() || !lstatHost(t, host("empty")).ModTime().Equal(mtime) {
		t.Fatalf("CreateWith times: %+v, %v; want mtime %v", e, err, mtime)
	}
	wantCode(t, "CreateWith past the largest offset", func() error {
		_, err := s.CreateWith(wire.CreateReq{Path: "far", Flags: wire.CreateWithData, Offset: math.MaxInt64, Data: []byte("x")})
		return err
	}(), wire.EFBIG)
}

func TestWrite(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	host := filepath.Join(fx.shareDir, "a.txt")

	before, err := os.Stat(host)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Write("a.txt", 3, []byte("p me"))
	if err != nil {
		t.Fatal(err)
	}
	e := resp.Entry
	if got := readFile(t, host); got != "help me" || e.Size != 7 {
		t.Errorf("after Write: %q, Entry size %d", got, e.Size)
	}
	// The state before the write is the file as it was.
	if pre := resp.Pre; pre.Size != uint64(before.Size()) || pre.MtimeNs != before.ModTime().UnixNano() || pre.CtimeNs == e.CtimeNs {
		t.Errorf("Write's state before the write is %+v; the file had size %d, mtime %d; ctime after %d",
			pre, before.Size(), before.ModTime().UnixNano(), e.CtimeNs)
	}
	sameEntry(t, "Write", e, host)
	if e.MtimeNs == oldTime.UnixNano() {
		t.Error("Write did not change the mtime")
	}
	// A hole, then bytes; a write of nothing changes nothing.
	if r, err := s.Write("a.txt", 10, []byte("!")); err != nil || r.Entry.Size != 11 {
		t.Errorf("Write past the end: %+v, %v", r, err)
	}
	if got := readFile(t, host); got != "help me\x00\x00\x00!" {
		t.Errorf("after a write past the end: %q", got)
	}
	if r, err := s.Write("a.txt", 0, nil); err != nil || r.Entry.Size != 11 {
		t.Errorf("Write of nothing: %+v, %v", r, err)
	}
	// Through a link inside the share, the target is written.
	if _, err := s.Write("link", 0, []byte("J")); err != nil || !strings.HasPrefix(readFile(t, host), "Jelp") {
		t.Errorf("Write through link: %v", err)
	}

	write := func(p string, off int64) error { _, err := s.Write(p, off, []byte("x")); return err }
	wantCode(t, "Write to a missing file", write("missing", 0), wire.ENOENT)
	wantCode(t, "Write to a directory", write("sub", 0), wire.EISDIR)
	wantCode(t, "Write to the share root", write("", 0), wire.EISDIR)
	wantCode(t, "Write at a negative offset", write("a.txt", -1), wire.EINVAL)
	wantCode(t, "Write past the largest offset", write("a.txt", math.MaxInt64), wire.EFBIG)
	if _, err := os.Lstat(filepath.Join(fx.shareDir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("Write created a missing file")
	}
}

func TestUnlinkRmdir(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	host := func(p string) string { return filepath.Join(fx.shareDir, p) }
	gone := func(p string) {
		t.Helper()
		if _, err := os.Lstat(host(p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still exists: %v", p, err)
		}
	}

	if err := s.Unlink("sub/b.txt"); err != nil {
		t.Fatal(err)
	}
	gone("sub/b.txt")
	if err := s.Unlink("link"); err != nil {
		t.Fatal(err)
	}
	gone("link")
	if readFile(t, host("a.txt")) != "hello" {
		t.Error("Unlink of a link touched its target")
	}
	wantCode(t, "Unlink of a directory", s.Unlink("sub"), wire.EISDIR)
	wantCode(t, "Unlink of the share root", s.Unlink(""), wire.EISDIR)
	wantCode(t, "Unlink of a missing name", s.Unlink("missing"), wire.ENOENT)
	wantCode(t, "Unlink under a file", s.Unlink("a.txt/x"), wire.ENOTDIR)

	if err := s.Mkdir("sub/empty", 0o755, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Symlink("tosub", "sub", 0); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "Rmdir of a non-empty directory", s.Rmdir("sub"), wire.ENOTEMPTY)
	wantCode(t, "Rmdir of a file", s.Rmdir("a.txt"), wire.ENOTDIR)
	wantCode(t, "Rmdir of a link to a directory", s.Rmdir("tosub"), wire.ENOTDIR)
	wantCode(t, "Rmdir of the share root", s.Rmdir(""), wire.EBUSY)
	wantCode(t, "Rmdir of a missing name", s.Rmdir("missing"), wire.ENOENT)
	// The parent may be reached through a link that stays inside.
	if err := s.Rmdir("tosub/empty"); err != nil {
		t.Fatal(err)
	}
	gone("sub/empty")
	if err := s.Unlink("sub/up"); err != nil {
		t.Fatal(err)
	}
	if err := s.Rmdir("sub"); err != nil {
		t.Fatal(err)
	}
	gone("sub")
}

func TestRename(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	host := func(p string) string { return filepath.Join(fx.shareDir, p) }
	write := func(p, content string) { writeFile(t, host(p), content, 0o644) }

	// A plain rename into another directory, then over an existing file.
	if err := s.Rename("a.txt", "sub/a.txt", 0); err != nil {
		t.Fatal(err)
	}
	if readFile(t, host("sub/a.txt")) != "hello" {
		t.Error("renamed file lost its content")
	}
	write("c.txt", "sea")
	if err := s.Rename("c.txt", "sub/a.txt", 0); err != nil {
		t.Fatal(err)
	}
	if readFile(t, host("sub/a.txt")) != "sea" {
		t.Error("rename over an existing file did not replace it")
	}

	// RENAME_NOREPLACE: refused over an existing name, and both names stay as they were.
	write("d.txt", "dee")
	wantCode(t, "Rename no-replace over a file", s.Rename("d.txt", "sub/b.txt", wire.RenameNoReplace), wire.EEXIST)
	if readFile(t, host("d.txt")) != "dee" || readFile(t, host("sub/b.txt")) != "bee" {
		t.Error("a refused no-replace rename changed a file")
	}
	if err := s.Rename("d.txt", "d2.txt", wire.RenameNoReplace); err != nil {
		t.Fatalf("no-replace rename to a free name: %v", err)
	}

	// RENAME_EXCHANGE: both names swap, a file with a directory too.
	if err := s.Rename("d2.txt", "sub/b.txt", wire.RenameExchange); err != nil {
		if errors.Is(err, syscall.EINVAL) {
			t.Skipf("the test filesystem lacks RENAME_EXCHANGE: %v", err)
		}
		t.Fatal(err)
	}
	if readFile(t, host("d2.txt")) != "bee" || readFile(t, host("sub/b.txt")) != "dee" {
		t.Errorf("exchange: d2.txt %q, sub/b.txt %q", readFile(t, host("d2.txt")), readFile(t, host("sub/b.txt")))
	}
	if err := os.Mkdir(host("dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename("d2.txt", "dir", wire.RenameExchange); err != nil {
		t.Fatal(err)
	}
	if !lstatHost(t, host("d2.txt")).IsDir() || readFile(t, host("dir")) != "bee" {
		t.Error("exchange of a file and a directory did not swap them")
	}
	wantCode(t, "Rename exchange with a missing name", s.Rename("dir", "missing", wire.RenameExchange), wire.ENOENT)

	// Links are renamed as names; their targets stay.
	if err := s.Rename("out", "sub/out", 0); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(host("sub/out")); err != nil || target != "../outside" {
		t.Errorf("renamed link: %q %v", target, err)
	}
	// A parent reached through a link inside the share.
	if err := s.Symlink("tosub", "sub", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename("dir", "tosub/moved", 0); err != nil || readFile(t, host("sub/moved")) != "bee" {
		t.Errorf("rename through tosub: %v", err)
	}

	// rename(2) semantics a mount relies on.
	if err := os.Mkdir(host("full"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("full/x", "x")
	if err := os.Mkdir(host("empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename("empty", "d2.txt", 0); err != nil {
		t.Errorf("a directory over an empty directory: %v", err)
	}
	wantCode(t, "Rename a directory over a non-empty one", s.Rename("d2.txt", "full", 0), wire.ENOTEMPTY)
	wantCode(t, "Rename a file over a directory", s.Rename("sub/b.txt", "full", 0), wire.EISDIR)
	wantCode(t, "Rename a directory over a file", s.Rename("full", "sub/b.txt", 0), wire.ENOTDIR)
	wantCode(t, "Rename a directory into itself", s.Rename("full", "full/inner", 0), wire.EINVAL)
	wantCode(t, "Rename a missing name", s.Rename("missing", "x", 0), wire.ENOENT)
	wantCode(t, "Rename the share root", s.Rename("", "x", 0), wire.EBUSY)
	wantCode(t, "Rename onto the share root", s.Rename("sub/b.txt", "", 0), wire.EBUSY)
	wantCode(t, "Rename with both flags", s.Rename("sub/b.txt", "y", wire.RenameNoReplace|wire.RenameExchange), wire.EINVAL)
	wantCode(t, "Rename with an unknown flag", s.Rename("sub/b.txt", "y", 1<<4), wire.EINVAL)
	if readFile(t, host("sub/b.txt")) != "dee" {
		t.Error("a refused rename moved sub/b.txt")
	}
}

func TestLink(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	host := func(p string) string { return filepath.Join(fx.shareDir, p) }

	e, err := s.Link("a.txt", "sub/a2.txt")
	if err != nil {
		t.Fatal(err)
	}
	if e.Nlink != 2 || e.Size != 5 || e.Name != "" {
		t.Errorf("Entry of the new link: %+v", e)
	}
	if !os.SameFile(lstatHost(t, host("a.txt")), lstatHost(t, host("sub/a2.txt"))) {
		t.Error("the new name is not the same file")
	}
	sameEntry(t, "Link", e, host("sub/a2.txt"))
	// A symlink is linked itself.
	if e, err := s.Link("link", "link2"); err != nil || !e.IsSymlink() || e.Target != "a.txt" {
		t.Errorf("Link of a symlink: %+v, %v", e, err)
	}
	link := func(from, to string) error { _, err := s.Link(from, to); return err }
	wantCode(t, "Link onto an existing name", link("a.txt", "sub/b.txt"), wire.EEXIST)
	wantCode(t, "Link of a directory", link("sub", "sub2"), wire.EPERM)
	wantCode(t, "Link of the share root", link("", "root2"), wire.EPERM)
	wantCode(t, "Link onto the share root", link("a.txt", ""), wire.EEXIST)
	wantCode(t, "Link of a missing file", link("missing", "m2"), wire.ENOENT)
}

func TestSetAttrSizeAndTimes(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	host := func(p string) string { return filepath.Join(fx.shareDir, p) }
	atime := time.Date(2010, 5, 6, 7, 8, 9, 123456789, time.UTC)
	mtime := time.Date(2011, 5, 6, 7, 8, 9, 987654321, time.UTC)
	times := func(p string) (time.Time, time.Time) {
		t.Helper()
		e, ok := rawEntry(lstatHost(t, host(p)))
		if !ok {
			t.Skip("no raw stat on this system")
		}
		return time.Unix(0, e.AtimeNs), time.Unix(0, e.MtimeNs)
	}

	// Shrink, then grow: the reply is the Entry after the change.
	resp, err := s.SetAttr(wire.SetAttrReq{Path: "a.txt", Valid: wire.SetSize, Size: 2})
	e := resp.Entry
	if resp.Pre.Size == 2 || resp.Pre.CtimeNs == e.CtimeNs {
		t.Errorf("SetAttr's state before the truncate is %+v; after, size %d ctime %d", resp.Pre, e.Size, e.CtimeNs)
	}
	if err != nil || e.Size != 2 || readFile(t, host("a.txt")) != "he" {
		t.Fatalf("truncate to 2: %+v, %v", e, err)
	}
	sameEntry(t, "SetAttr size", e, host("a.txt"))
	if r, err := s.SetAttr(wire.SetAttrReq{Path: "a.txt", Valid: wire.SetSize, Size: 6}); err != nil || r.Entry.Size != 6 || readFile(t, host("a.txt")) != "he\x00\x00\x00\x00" {
		t.Fatalf("extend to 6: %+v, %v", r, err)
	}
	// Size, mode and both times in one request: the times set win over the truncate's.
	e, err = setAttrEntry(s, wire.SetAttrReq{Path: "a.txt", Valid: wire.SetSize | wire.SetMode | wire.SetAtime | wire.SetMtime,
		Size: 1, Mode: 0o4711, AtimeNs: atime.UnixNano(), MtimeNs: mtime.UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	if a, m := times("a.txt"); !a.Equal(atime) || !m.Equal(mtime) || e.MtimeNs != mtime.UnixNano() || e.AtimeNs != atime.UnixNano() {
		t.Errorf("times after SetAttr: atime %v mtime %v (Entry %d %d)", a, m, e.AtimeNs, e.MtimeNs)
	}
	if fi := lstatHost(t, host("a.txt")); fi.Size() != 1 || fi.Mode() != 0o711 {
		t.Errorf("after SetAttr: size %d mode %v", fi.Size(), fi.Mode())
	}
	// Atime alone leaves mtime; 1970 and before are times like any other.
	if _, err := s.SetAttr(wire.SetAttrReq{Path: "sub", Valid: wire.SetAtime, AtimeNs: 0}); err != nil {
		t.Fatal(err)
	}
	if a, m := times("sub"); a.UnixNano() != 0 || m.Equal(time.Unix(0, 0)) {
		t.Errorf("sub after an atime-only SetAttr: atime %v mtime %v", a, m)
	}
	// On a symlink the link's own times change, never its target's.
	before := lstatHost(t, host("a.txt"))
	e, err = setAttrEntry(s, wire.SetAttrReq{Path: "link", Valid: wire.SetAtime | wire.SetMtime, AtimeNs: -1e9, MtimeNs: mtime.UnixNano()})
	if err != nil || !e.IsSymlink() || e.Target != "a.txt" {
		t.Fatalf("SetAttr on a link: %+v, %v", e, err)
	}
	// Reading the link's target for the Entry updates its atime on disk (relatime: the time set
	// is older than the mtime), so the atime is checked in the Entry, taken before.
	if _, m := times("link"); e.AtimeNs != -1e9 || !m.Equal(mtime) || e.MtimeNs != mtime.UnixNano() {
		t.Errorf("link times: Entry atime %d mtime %d, disk mtime %v", e.AtimeNs, e.MtimeNs, m)
	}
	if after := lstatHost(t, host("a.txt")); !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Error("SetAttr on a link changed its target")
	}

	size := func(p string, n uint64) error {
		_, err := s.SetAttr(wire.SetAttrReq{Path: p, Valid: wire.SetSize, Size: n})
		return err
	}
	wantCode(t, "size of a directory", size("sub", 0), wire.EISDIR)
	wantCode(t, "size of the share root", size("", 0), wire.EISDIR)
	wantCode(t, "size of a symlink", size("link", 0), wire.EINVAL)
	wantCode(t, "size past the largest file", size("a.txt", 1<<63), wire.EFBIG)
	wantCode(t, "size of a missing file", size("missing", 0), wire.ENOENT)
	if fi := lstatHost(t, host("a.txt")); fi.Size() != 1 {
		t.Errorf("refused sizes changed a.txt to %d bytes", fi.Size())
	}
}

func TestStatfs(t *testing.T) {
	fx := newFixture(t, false)
	st, err := fx.s.Statfs()
	if err != nil {
		t.Fatal(err)
	}
	var host unix.Statfs_t
	if err := unix.Statfs(fx.shareDir, &host); err != nil {
		t.Fatal(err)
	}
	if st.Bsize == 0 || st.Blocks == 0 || st.Bfree > st.Blocks || st.Bavail > st.Blocks || st.NameLen == 0 {
		t.Errorf("Statfs = %+v", st)
	}
	if st.Blocks != host.Blocks || st.NameLen != uint32(host.Namelen) || st.Files != host.Files {
		t.Errorf("Statfs = %+v, statfs(2) of the folder says %+v", st, host)
	}
	// Statfs reads only: a read-only share answers too.
	ro, err := Open("ro", fx.shareDir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.Statfs(); err != nil {
		t.Errorf("Statfs of a read-only share: %v", err)
	}
}

// xattrsSupported reports whether the test filesystem takes user attributes (tmpfs before
// Linux 6.6 does not).
func xattrsSupported(t *testing.T, dir string) bool {
	t.Helper()
	p := filepath.Join(dir, ".xattr-probe")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(p)
	return unix.Setxattr(p, "user.probe", []byte("1"), 0) == nil
}

func TestXattr(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	if !xattrsSupported(t, fx.shareDir) {
		t.Skip("the test filesystem does not support user extended attributes")
	}
	for _, p := range []string{"a.txt", "sub", ""} {
		if err := s.SetXattr(p, "user.comment", []byte("\x00binary\xff"), wire.XattrCreate); err != nil {
			t.Fatalf("SetXattr(%q): %v", p, err)
		}
		if v, err := s.GetXattr(p, "user.comment"); err != nil || string(v) != "\x00binary\xff" {
			t.Errorf("GetXattr(%q) = %q, %v", p, v, err)
		}
		host := make([]byte, 64)
		if n, err := unix.Lgetxattr(filepath.Join(fx.shareDir, p), "user.comment", host); err != nil || string(host[:n]) != "\x00binary\xff" {
			t.Errorf("the owner's disk holds %q, %v for %q", host[:n], err, p)
		}
	}
	if err := s.SetXattr("a.txt", "user.empty", nil, 0); err != nil {
		t.Fatal(err)
	}
	if v, err := s.GetXattr("a.txt", "user.empty"); err != nil || len(v) != 0 {
		t.Errorf("empty value: %q, %v", v, err)
	}
	// A value of some kilobytes (ext4 keeps a value within one block, so not XATTR_SIZE_MAX).
	big := bytes.Repeat([]byte("v"), 4000)
	if err := s.SetXattr("a.txt", "user.big", big, 0); err != nil {
		t.Fatal(err)
	}
	if v, err := s.GetXattr("a.txt", "user.big"); err != nil || !bytes.Equal(v, big) {
		t.Errorf("big value: %d bytes, %v", len(v), err)
	}
	names, err := s.ListXattr("a.txt")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"user.big", "user.comment", "user.empty"}) {
		t.Errorf("ListXattr = %q", names)
	}
	if err := s.SetXattr("a.txt", "user.comment", []byte("new"), wire.XattrReplace); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveXattr("a.txt", "user.comment"); err != nil {
		t.Fatal(err)
	}
	get := func(p, name string) error { _, err := s.GetXattr(p, name); return err }
	wantCode(t, "GetXattr of a removed name", get("a.txt", "user.comment"), wire.ENODATA)
	wantCode(t, "RemoveXattr of a missing name", s.RemoveXattr("a.txt", "user.comment"), wire.ENODATA)
	wantCode(t, "SetXattr create over an existing name", s.SetXattr("a.txt", "user.big", nil, wire.XattrCreate), wire.EEXIST)
	wantCode(t, "SetXattr replace of a missing name", s.SetXattr("a.txt", "user.none", nil, wire.XattrReplace), wire.ENODATA)
	wantCode(t, "SetXattr with both flags", s.SetXattr("a.txt", "user.x", nil, wire.XattrCreate|wire.XattrReplace), wire.EINVAL)

	// Only the user namespace is served, whatever the caller's rights on the owner.
	for _, name := range []string{"security.selinux", "trusted.x", "system.posix_acl_access", "other.x", "user", "USER.x"} {
		wantCode(t, "GetXattr "+name, get("a.txt", name), wire.EOPNOTSUPP)
		wantCode(t, "SetXattr "+name, s.SetXattr("a.txt", name, []byte("x"), 0), wire.EOPNOTSUPP)
		wantCode(t, "RemoveXattr "+name, s.RemoveXattr("a.txt", name), wire.EOPNOTSUPP)
	}
	wantCode(t, "GetXattr of the bare prefix", get("a.txt", "user."), wire.EINVAL)
	wantCode(t, "SetXattr name with NUL", s.SetXattr("a.txt", "user.a\x00b", nil, 0), wire.EINVAL)

	// A symlink has no user attributes, as on Linux: reads find none, changes are not permitted,
	// and its target is never reached.
	wantCode(t, "GetXattr of a symlink", get("link", "user.big"), wire.ENODATA)
	wantCode(t, "SetXattr of a symlink", s.SetXattr("link", "user.x", []byte("x"), 0), wire.EPERM)
	wantCode(t, "RemoveXattr of a symlink", s.RemoveXattr("link", "user.big"), wire.EPERM)
	if names, err := s.ListXattr("link"); err != nil || len(names) != 0 {
		t.Errorf("ListXattr of a symlink = %q, %v", names, err)
	}
	if names, err := s.ListXattr("sub/b.txt"); err != nil || names == nil || len(names) != 0 {
		t.Errorf("ListXattr of a file without attributes = %#v, %v", names, err)
	}
	wantCode(t, "GetXattr of a missing file", get("missing", "user.x"), wire.ENOENT)

	// A read-only share reads attributes and changes none.
	ro, err := Open("ro", fx.shareDir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if v, err := ro.GetXattr("a.txt", "user.big"); err != nil || !bytes.Equal(v, big) {
		t.Errorf("GetXattr on a read-only share: %v", err)
	}
	if names, err := ro.ListXattr("a.txt"); err != nil || len(names) != 2 {
		t.Errorf("ListXattr on a read-only share: %q, %v", names, err)
	}
	wantCode(t, "SetXattr on a read-only share", ro.SetXattr("a.txt", "user.big", nil, 0), wire.EROFS)
	wantCode(t, "RemoveXattr on a read-only share", ro.RemoveXattr("a.txt", "user.big"), wire.EROFS)
}

func TestFallocate(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	host := filepath.Join(fx.shareDir, "a.txt")
	const (
		keepSize  = 0x01
		punchHole = 0x02
	)
	e, err := s.Fallocate("a.txt", 0, 0, 1<<20)
	if errors.Is(err, syscall.EOPNOTSUPP) {
		t.Skipf("the test filesystem has no fallocate: %v", err)
	}
	if err != nil || e.Size != 1<<20 {
		t.Fatalf("Fallocate to 1 MiB: %+v, %v", e, err)
	}
	sameEntry(t, "Fallocate", e, host)
	if e, err := s.Fallocate("a.txt", keepSize, 0, 4<<20); err != nil || e.Size != 1<<20 {
		t.Errorf("Fallocate with KEEP_SIZE: %+v, %v", e, err)
	}
	if e, err := s.Fallocate("a.txt", punchHole|keepSize, 0, 4096); err == nil {
		if got := readFile(t, host); e.Size != 1<<20 || !strings.HasPrefix(got, "\x00\x00\x00\x00\x00") {
			t.Errorf("after punching the first block: size %d, starts %q", e.Size, got[:5])
		}
	} else if Errno(err) != wire.EOPNOTSUPP {
		t.Errorf("punch hole: %v", err)
	}
	falloc := func(p string, mode uint32, off, n int64) error { _, err := s.Fallocate(p, mode, off, n); return err }
	wantCode(t, "Fallocate with an unknown mode bit", falloc("a.txt", 0x04, 0, 1), wire.EOPNOTSUPP)
	wantCode(t, "Fallocate with a high mode bit", falloc("a.txt", 1<<31, 0, 1), wire.EOPNOTSUPP)
	wantCode(t, "Fallocate of a directory", falloc("sub", 0, 0, 1), wire.EISDIR)
	wantCode(t, "Fallocate of a missing file", falloc("missing", 0, 0, 1), wire.ENOENT)
	wantCode(t, "Fallocate at a negative offset", falloc("a.txt", 0, -1, 1), wire.EINVAL)
	wantCode(t, "Fallocate of nothing", falloc("a.txt", 0, 0, 0), wire.EINVAL)
	wantCode(t, "Fallocate past the largest file", falloc("a.txt", 0, math.MaxInt64, 1), wire.EFBIG)
}

func TestFsync(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	for _, p := range []string{"a.txt", "sub", "", "link"} {
		for _, dataOnly := range []bool{false, true} {
			if err := s.Fsync(p, dataOnly); err != nil {
				t.Errorf("Fsync(%q, %v): %v", p, dataOnly, err)
			}
		}
	}
	if err := os.Chmod(filepath.Join(fx.shareDir, "sub", "b.txt"), 0o200); err != nil {
		t.Fatal(err)
	}
	if err := s.Fsync("sub/b.txt", false); err != nil {
		t.Errorf("Fsync of a write-only file: %v", err)
	}
	wantCode(t, "Fsync of a missing file", s.Fsync("missing", false), wire.ENOENT)
	if err := syscall.Mkfifo(filepath.Join(fx.shareDir, "fifo"), 0o600); err == nil {
		wantCode(t, "Fsync of a FIFO", s.Fsync("fifo", false), wire.EINVAL)
	}
}

func TestReadDirInline(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	dir := filepath.Join(fx.shareDir, "sub")
	writeFile(t, filepath.Join(dir, "empty"), "", 0o644)
	writeFile(t, filepath.Join(dir, "max"), strings.Repeat("m", 100), 0o644)
	writeFile(t, filepath.Join(dir, "over"), strings.Repeat("o", 101), 0o644)
	writeFile(t, filepath.Join(dir, "secret"), "s", 0o000)

	list, err := s.ReadDirInline("sub", 100)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]wire.Entry{}
	for _, e := range list {
		got[e.Name] = e
		if e.HasData && uint64(len(e.Data)) != e.Size {
			t.Errorf("%s: %d bytes inlined, Size %d", e.Name, len(e.Data), e.Size)
		}
	}
	want := map[string]string{"b.txt": "bee", "empty": "", "max": strings.Repeat("m", 100)}
	for name, data := range want {
		if e := got[name]; !e.HasData || string(e.Data) != data {
			t.Errorf("%s: HasData %v Data %q, want %q", name, e.HasData, e.Data, data)
		}
	}
	if e := got["over"]; e.HasData || e.Data != nil || e.Size != 101 {
		t.Errorf("a file over the limit was inlined: %+v", e)
	}
	if e := got["up"]; e.HasData || !e.IsSymlink() {
		t.Errorf("a symlink was inlined: %+v", e)
	}
	if os.Geteuid() != 0 && got["secret"].HasData {
		t.Error("an unreadable file was inlined")
	}
	if len(list) != 6 {
		t.Errorf("listed %d entries, want 6: an unreadable file is listed, only without data", len(list))
	}
	// Without a limit nothing is inlined; the listing is ReadDir's.
	plain, err := s.ReadDir("sub")
	if err != nil {
		t.Fatal(err)
	}
	none, err := s.ReadDirInline("sub", 0)
	if err != nil || len(none) != len(plain) {
		t.Fatalf("ReadDirInline(0): %d entries, %v", len(none), err)
	}
	for i := range none {
		if none[i].HasData || none[i].Name != plain[i].Name {
			t.Errorf("ReadDirInline(0)[%d] = %+v", i, none[i])
		}
	}
	// The limit is capped at wire.MaxInline.
	writeFile(t, filepath.Join(dir, "big"), strings.Repeat("b", wire.MaxInline+1), 0o644)
	list, err = s.ReadDirInline("sub", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if e.Name == "big" && e.HasData {
			t.Errorf("a file of %d bytes was inlined; MaxInline is %d", e.Size, wire.MaxInline)
		}
		if e.Name == "over" && !e.HasData {
			t.Error("over was not inlined under a large limit")
		}
	}
	wantCode(t, "ReadDirInline of a file", func() error { _, err := s.ReadDirInline("a.txt", 10); return err }(), wire.ENOTDIR)
}

// TestMountWritesReadOnly: every write of the mount is refused on a read-only share before
// anything on disk changes.
func TestMountWritesReadOnly(t *testing.T) {
	fx := newFixture(t, true)
	s := fx.s
	shareBefore := snapshot(t, fx.shareDir)
	writes := map[string]func() error{
		"Create":      func() error { _, err := s.Create("new", 0o644, 0); return err },
		"Create root": func() error { _, err := s.Create("", 0o644, 0); return err },
		"Write":       func() error { _, err := s.Write("a.txt", 0, []byte("x")); return err },
		"Unlink":      func() error { return s.Unlink("a.txt") },
		"Rmdir":       func() error { return s.Rmdir("sub") },
		"Rename":      func() error { return s.Rename("a.txt", "b", 0) },
		"Rename xchg": func() error { return s.Rename("a.txt", "sub", wire.RenameExchange) },
		"Link":        func() error { _, err := s.Link("a.txt", "b"); return err },
		"SetAttr":     func() error { _, err := s.SetAttr(wire.SetAttrReq{Path: "a.txt", Valid: wire.SetSize}); return err },
		"SetXattr":    func() error { return s.SetXattr("a.txt", "user.x", nil, 0) },
		"RemoveXattr": func() error { return s.RemoveXattr("a.txt", "user.x") },
		"Fallocate":   func() error { _, err := s.Fallocate("a.txt", 0, 0, 1<<20); return err },
		"Fsync":       func() error { return s.Fsync("a.txt", false) },
	}
	for name, w := range writes {
		err := w()
		wantCode(t, name, err, wire.EROFS)
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s: %v does not match ErrReadOnly", name, err)
		}
	}
	if list, err := s.ReadDirInline("", 100); err != nil || len(list) == 0 {
		t.Errorf("ReadDirInline on a read-only share: %v", err)
	}
	if _, err := s.ListXattr("a.txt"); err != nil {
		t.Errorf("ListXattr on a read-only share: %v", err)
	}
	sameSnapshot(t, "share", shareBefore, snapshot(t, fx.shareDir))
}

// TestMkdirModes: a mount's mkdir (NAME_EXCLUSIVE) gets the mode asked for exactly, sticky
// included, and keeps a set-group-ID bit inherited from its parent; a tree sent (no flag)
// gets the owner's umask.
func TestMkdirModes(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	host := func(p string) string { return filepath.Join(fx.shareDir, p) }
	if umask() == 0 {
		syscall.Umask(0o022)
		defer syscall.Umask(0)
	}
	for _, mode := range []uint32{0, 0o777, 0o1777, 0o750} {
		name := fmt.Sprintf("d%o", mode)
		if err := s.Mkdir(name, mode, wire.NameExclusive); err != nil {
			t.Fatal(err)
		}
		if got, want := lstatHost(t, host(name)).Mode(), fs.ModeDir|fileMode(mode, true); got != want {
			t.Errorf("mkdir with mode %#o: %v, want %v", mode, got, want)
		}
	}
	if err := s.Mkdir("sent", 0o777, 0); err != nil {
		t.Fatal(err)
	}
	if got, want := lstatHost(t, host("sent")).Mode(), fs.ModeDir|0o777&^umask(); got != want {
		t.Errorf("a directory sent with mode 0777: %v, want %v", got, want)
	}
	if err := os.Chmod(host("d777"), fs.ModeSetgid|0o777); err != nil {
		t.Fatal(err)
	}
	if err := s.Mkdir("d777/sub", 0o755, wire.NameExclusive); err != nil {
		t.Fatal(err)
	}
	if got := lstatHost(t, host("d777/sub")).Mode(); got&fs.ModeSetgid == 0 || got.Perm() != 0o755 {
		t.Errorf("mkdir in a set-group-ID directory: %v, want drwxr-sr-x", got)
	}
}
