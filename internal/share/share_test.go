//go:build unix

package share

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/wire"
)

func TestOpen(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	writeFile(t, file, "x", 0o644)
	tests := []struct {
		name, shareName, dir, wantText string
	}{
		{"missing folder", "s", filepath.Join(base, "missing"), "does not exist"},
		{"a file", "s", file, "not a folder"},
		{"bad share name", ".hidden", base, "rename the share"},
		{"empty share name", "", base, "rename the share"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(tt.shareName, tt.dir, false)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not say %q", err, tt.wantText)
			}
		})
	}

	s, err := Open("docs", base, true)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != "docs" || s.Dir() != base || !s.ReadOnly() {
		t.Errorf("Name, Dir, ReadOnly = %q, %q, %v", s.Name(), s.Dir(), s.ReadOnly())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(""); err == nil {
		t.Error("Stat after Close succeeded")
	}
}

func TestStat(t *testing.T) {
	fx := newFixture(t, false)
	// The owner's own set-id bits are reported exactly.
	if err := os.Chmod(filepath.Join(fx.shareDir, "sub", "b.txt"), fs.ModeSetuid|fs.ModeSetgid|0o755); err != nil {
		t.Fatal(err)
	}
	rootInfo, err := os.Lstat(fx.shareDir)
	if err != nil {
		t.Fatal(err)
	}
	subInfo, err := os.Lstat(filepath.Join(fx.shareDir, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path     string
		wantMode uint32
		wantSize uint64
		target   string
	}{
		{"", wire.ModeDir | uint32(rootInfo.Mode().Perm()), 0, ""},
		{"a.txt", wire.ModeRegular | 0o640, 5, ""},
		{"sub", wire.ModeDir | uint32(subInfo.Mode().Perm()), 0, ""},
		{"sub/b.txt", wire.ModeRegular | 0o6755, 3, ""},
		{"link", wire.ModeSymlink | 0o777, 5, "a.txt"},
		{"sub/up", wire.ModeSymlink | 0o777, 8, "../a.txt"},
		{"out", wire.ModeSymlink | 0o777, 10, "../outside"},
		{"dangling", wire.ModeSymlink | 0o777, 7, "missing"},
		{"link/x", 0, 0, ""}, // a file is not a directory
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			e, err := fx.s.Stat(tt.path)
			if tt.wantMode == 0 {
				wantCode(t, "Stat", err, wire.ENOTDIR)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Mode != tt.wantMode || (!e.IsDir() && e.Size != tt.wantSize) || e.Target != tt.target || e.Name != "" {
				t.Errorf("Stat = mode %o size %d target %q name %q; want mode %o size %d target %q",
					e.Mode, e.Size, e.Target, e.Name, tt.wantMode, tt.wantSize, tt.target)
			}
			fi, err := os.Lstat(filepath.Join(fx.shareDir, tt.path))
			if err != nil {
				t.Fatal(err)
			}
			raw, ok := rawEntry(fi)
			if !ok {
				return
			}
			// Reading a link's target updates its atime, so the atime is compared for other types only.
			if e.IsSymlink() {
				raw.AtimeNs = e.AtimeNs
			}
			raw.Name, raw.Target = e.Name, e.Target
			if !reflect.DeepEqual(e, raw) {
				t.Errorf("Stat = %+v\n lstat = %+v", e, raw)
			}
			if tt.path == "a.txt" && e.MtimeNs != oldTime.UnixNano() {
				t.Errorf("a.txt mtime = %d, want %d", e.MtimeNs, oldTime.UnixNano())
			}
		})
	}
}

func TestReadDir(t *testing.T) {
	fx := newFixture(t, false)
	list, err := fx.s.ReadDir("")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byName := map[string]wire.Entry{}
	for _, e := range list {
		names = append(names, e.Name)
		byName[e.Name] = e
	}
	want := []string{"a.txt", "abs", "absfile", "dangling", "link", "loop", "out", "sub"}
	if !slices.Equal(names, want) {
		t.Errorf("ReadDir names = %q, want %q", names, want)
	}
	if e := byName["a.txt"]; e.Mode != wire.ModeRegular|0o640 || e.Size != 5 || e.MtimeNs != oldTime.UnixNano() {
		t.Errorf("a.txt = %+v", e)
	}
	if e := byName["sub"]; !e.IsDir() {
		t.Errorf("sub = %+v", e)
	}
	if e := byName["out"]; !e.IsSymlink() || e.Target != "../outside" {
		t.Errorf("out = %+v", e)
	}
	if e := byName["abs"]; !e.IsSymlink() || e.Target != fx.outside {
		t.Errorf("abs = %+v", e)
	}

	sub, err := fx.s.ReadDir("sub")
	if err != nil {
		t.Fatal(err)
	}
	if len(sub) != 2 || sub[0].Name != "b.txt" || sub[1].Name != "up" || sub[1].Target != "../a.txt" {
		t.Errorf("ReadDir(sub) = %+v", sub)
	}

	// A link to a directory inside the share is listed like the directory.
	if err := fx.s.Symlink("sublink", "sub", 0); err != nil {
		t.Fatal(err)
	}
	if l, err := fx.s.ReadDir("sublink"); err != nil || len(l) != 2 {
		t.Errorf("ReadDir(sublink) = %+v, %v", l, err)
	}

	for _, tt := range []struct {
		path string
		want wire.Errno
	}{
		{"a.txt", wire.ENOTDIR},
		{"link", wire.ENOTDIR},
		{"missing", wire.ENOENT},
		{"sub/up", wire.ENOTDIR},
	} {
		_, err := fx.s.ReadDir(tt.path)
		wantCode(t, "ReadDir("+tt.path+")", err, tt.want)
	}
}

func TestOpenRead(t *testing.T) {
	fx := newFixture(t, false)
	if err := syscall.Mkfifo(filepath.Join(fx.shareDir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path, want string
		code       wire.Errno
	}{
		{"a.txt", "hello", 0},
		{"link", "hello", 0},
		{"sub/up", "hello", 0},
		{"sub/b.txt", "bee", 0},
		{"sub", "", wire.EISDIR},
		{"", "", wire.EISDIR},
		{"fifo", "", wire.EINVAL}, // must not block waiting for a writer
		{"missing", "", wire.ENOENT},
		{"a.txt/x", "", wire.ENOTDIR},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			f, e, err := fx.s.OpenRead(tt.path)
			if tt.code != 0 {
				wantCode(t, "OpenRead", err, tt.code)
				if f != nil {
					t.Error("file returned with an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b, err := io.ReadAll(f)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want || e.Size != uint64(len(tt.want)) || !e.IsRegular() || e.Name != "" || e.Target != "" {
				t.Errorf("OpenRead = %q, %+v", b, e)
			}
		})
	}
}

func TestUpload(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	part := filepath.Join(fx.shareDir, "sub", ".new.txt.peerfs-part")
	mtime := time.Date(2010, 5, 6, 7, 8, 9, 123456789, time.UTC)

	f, off, err := s.CreatePart("sub/new.txt", false)
	if err != nil || off != 0 {
		t.Fatalf("CreatePart = %d, %v", off, err)
	}
	f.WriteString("hel")
	f.Close()
	if fi, err := os.Lstat(part); err != nil || fi.Mode() != 0o600 {
		t.Fatalf("part file: %v, %v; want mode 0600", fi, err)
	}

	f, off, err = s.CreatePart("sub/new.txt", true)
	if err != nil || off != 3 {
		t.Fatalf("CreatePart resume = %d, %v; want offset 3", off, err)
	}
	f.WriteString("lo world") // continues at the offset
	f.Close()

	if err := s.CommitPart("sub/new.txt", 0o4751, mtime); err != nil {
		t.Fatal(err)
	}
	got := filepath.Join(fx.shareDir, "sub", "new.txt")
	b, _ := os.ReadFile(got)
	fi, err := os.Lstat(got)
	if err != nil || string(b) != "hello world" || fi.Mode() != 0o751 || !fi.ModTime().Equal(mtime) {
		t.Errorf("committed file = %q, %v, %v: want \"hello world\", 0751 (set-uid dropped), %v", b, fi, err, mtime)
	}
	if _, err := os.Lstat(part); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("part file still there after commit: %v", err)
	}

	// resume=false discards an old part; commit replaces an existing file.
	f, _, _ = s.CreatePart("a.txt", false)
	f.WriteString("stale")
	f.Close()
	f, off, err = s.CreatePart("a.txt", false)
	if err != nil || off != 0 {
		t.Fatalf("CreatePart over old part = %d, %v", off, err)
	}
	f.WriteString("new")
	f.Close()
	if err := s.CommitPart("a.txt", 0o600, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(fx.shareDir, "a.txt")); string(b) != "new" {
		t.Errorf("a.txt = %q after commit", b)
	}

	// Resume with nothing to resume starts at 0.
	f, off, err = s.CreatePart("fresh", true)
	if err != nil || off != 0 {
		t.Fatalf("CreatePart resume without part = %d, %v", off, err)
	}
	f.Close()
	if err := s.RemovePart("fresh"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemovePart("fresh"); err != nil {
		t.Errorf("RemovePart of no part = %v, want success", err)
	}

	// Directories are never replaced.
	_, _, err = s.CreatePart("sub", false)
	wantCode(t, "CreatePart(sub)", err, wire.EISDIR)
	_, _, err = s.CreatePart("", false)
	wantCode(t, "CreatePart(root)", err, wire.EISDIR)
	f, _, _ = s.CreatePart("dir2", false)
	f.Close()
	if err := s.Mkdir("dir2", 0o755, 0); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "CommitPart over a dir", s.CommitPart("dir2", 0o644, mtime), wire.EISDIR)
	wantCode(t, "CommitPart without part", s.CommitPart("nothing", 0o644, mtime), wire.ENOENT)
	_, _, err = s.CreatePart("missingdir/x", false)
	wantCode(t, "CreatePart(missingdir/x)", err, wire.ENOENT)
	if err := os.Mkdir(filepath.Join(fx.shareDir, ".d.peerfs-part"), 0o755); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "RemovePart with a dir as part", s.RemovePart("d"), wire.EISDIR)
	_, _, err = s.CreatePart("d", false)
	wantCode(t, "CreatePart with a dir as part", err, wire.EISDIR)
}

func TestMkdir(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	tests := []struct {
		path string
		want wire.Errno
	}{
		{"new", 0},
		{"new", 0}, // again: an existing directory is success
		{"new/deeper", 0},
		{"sub", 0},
		{"", 0},
		{"a.txt", wire.EEXIST},
		{"link", wire.EEXIST},
		{"dangling", wire.EEXIST},
		{"missing/x", wire.ENOENT},
		{"a.txt/x", wire.ENOTDIR},
	}
	for _, tt := range tests {
		wantCode(t, "Mkdir("+tt.path+")", s.Mkdir(tt.path, 0o750, 0), tt.want)
	}
	fi, err := os.Lstat(filepath.Join(fx.shareDir, "new"))
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&^0o750 != 0 {
		t.Errorf("new = %v, %v", fi, err)
	}

	// Exclusive, as a mount asks: any existing name is EEXIST, as for mkdir(2).
	exclusive := []struct {
		path string
		want wire.Errno
	}{
		{"fresh", 0},
		{"fresh", wire.EEXIST},
		{"sub", wire.EEXIST},
		{"", wire.EEXIST},
		{"a.txt", wire.EEXIST},
		{"link", wire.EEXIST},
		{"missing/x", wire.ENOENT},
	}
	for _, tt := range exclusive {
		wantCode(t, "exclusive Mkdir("+tt.path+")", s.Mkdir(tt.path, 0o750, wire.NameExclusive), tt.want)
	}
}

func TestSymlink(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	readlink := func(name string) string {
		t.Helper()
		got, err := os.Readlink(filepath.Join(fx.shareDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if err := s.Symlink("sub/l", "../a.txt", 0); err != nil {
		t.Fatal(err)
	}
	if got := readlink("sub/l"); got != "../a.txt" {
		t.Errorf("sub/l -> %q", got)
	}
	// Replace an existing link, including one leading outside: the link changes, not its target.
	for _, name := range []string{"sub/l", "out", "dangling"} {
		if err := s.Symlink(name, "b.txt", 0); err != nil {
			t.Fatalf("Symlink(%s) replace: %v", name, err)
		}
		if got := readlink(name); got != "b.txt" {
			t.Errorf("%s -> %q after replace", name, got)
		}
	}
	// Target stored verbatim, even one that leads nowhere or outside.
	if err := s.Symlink("far", "/no/such/../place", 0); err != nil {
		t.Fatal(err)
	}
	if got := readlink("far"); got != "/no/such/../place" {
		t.Errorf("far -> %q", got)
	}
	wantCode(t, "Symlink over a file", s.Symlink("a.txt", "x", 0), wire.EEXIST)
	wantCode(t, "Symlink over a dir", s.Symlink("sub", "x", 0), wire.EEXIST)
	wantCode(t, "Symlink at root", s.Symlink("", "x", 0), wire.EEXIST)
	wantCode(t, "Symlink empty target", s.Symlink("e", "", 0), wire.EINVAL)
	// Exclusive, as a mount asks: an existing link stays as it is, as for symlink(2).
	wantCode(t, "exclusive Symlink over a link", s.Symlink("far", "elsewhere", wire.NameExclusive), wire.EEXIST)
	if got := readlink("far"); got != "/no/such/../place" {
		t.Errorf("far -> %q after a refused exclusive Symlink", got)
	}
	if err := s.Symlink("new-link", "b.txt", wire.NameExclusive); err != nil {
		t.Fatalf("exclusive Symlink of a new name: %v", err)
	}
	if got := readlink("new-link"); got != "b.txt" {
		t.Errorf("new-link -> %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(fx.shareDir, "a.txt")); string(b) != "hello" {
		t.Errorf("a.txt = %q", b)
	}
	entries, _ := os.ReadDir(fx.shareDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".peerfs-link-") {
			t.Errorf("temporary link %s left behind", e.Name())
		}
	}
}

func TestSetAttr(t *testing.T) {
	fx := newFixture(t, false)
	s := fx.s
	mtime := time.Date(2015, 1, 2, 3, 4, 5, 600000007, time.UTC)
	lstat := func(name string) fs.FileInfo {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(fx.shareDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	tests := []struct {
		path      string
		valid     uint32
		mode      uint32
		wantMode  fs.FileMode
		wantMtime time.Time
	}{
		{"a.txt", wire.SetMode, 0o600, 0o600, oldTime},
		{"a.txt", wire.SetMtime, 0o777, 0o600, mtime},
		{"a.txt", wire.SetMode | wire.SetMtime, 0o6755, 0o755, mtime.Add(time.Second)}, // set-id dropped on files
		{"sub", wire.SetMode, 0o3775, fs.ModeDir | fs.ModeSetgid | fs.ModeSticky | 0o775, lstat("sub").ModTime()},
		{"sub", wire.SetMtime, 0, fs.ModeDir | fs.ModeSetgid | fs.ModeSticky | 0o775, mtime},
		{"", wire.SetMtime, 0, lstat("").Mode(), mtime},
		{"sub/b.txt", 0, 0o777, 0o644, oldTime}, // nothing valid, nothing changed
	}
	for _, tt := range tests {
		if err := setAttr(s, tt.path, tt.valid, tt.mode, tt.wantMtime); err != nil {
			t.Fatalf("SetAttr(%q, %b, %o): %v", tt.path, tt.valid, tt.mode, err)
		}
		fi := lstat(tt.path)
		if fi.Mode() != tt.wantMode || !fi.ModTime().Equal(tt.wantMtime) {
			t.Errorf("SetAttr(%q, %b, %o): mode %v mtime %v; want %v %v", tt.path, tt.valid, tt.mode,
				fi.Mode(), fi.ModTime(), tt.wantMode, tt.wantMtime)
		}
	}

	// On a symlink: the mode is skipped and the mtime set on the link, never on its target.
	target := lstat("a.txt")
	if err := setAttr(s, "link", wire.SetMode|wire.SetMtime, 0o000, mtime); err != nil {
		t.Fatal(err)
	}
	if fi := lstat("link"); runtime.GOOS == "linux" && !fi.ModTime().Equal(mtime) {
		t.Errorf("link mtime = %v, want %v", fi.ModTime(), mtime)
	}
	if fi := lstat("a.txt"); fi.Mode() != target.Mode() || !fi.ModTime().Equal(target.ModTime()) {
		t.Errorf("SetAttr on link changed its target: %v %v", fi.Mode(), fi.ModTime())
	}
	if err := setAttr(s, "sub/up", wire.SetMtime, 0, mtime); err != nil {
		t.Fatal(err)
	}
	if fi := lstat("sub/up"); runtime.GOOS == "linux" && !fi.ModTime().Equal(mtime) {
		t.Errorf("sub/up mtime = %v", fi.ModTime())
	}

	wantCode(t, "SetAttr unknown bits", setAttr(s, "a.txt", 1<<6, 0, mtime), wire.EINVAL)
	wantCode(t, "SetAttr missing", setAttr(s, "missing", wire.SetMode, 0o644, mtime), wire.ENOENT)
}

func TestReadOnlyShare(t *testing.T) {
	fx := newFixture(t, true)
	s := fx.s
	// A part left by an earlier writable session, so RemovePart and CommitPart have work.
	writeFile(t, filepath.Join(fx.shareDir, ".a.txt.peerfs-part"), "part", 0o600)
	shareBefore := snapshot(t, fx.shareDir)
	outsideBefore := snapshot(t, fx.outside)

	writes := []struct {
		name string
		call func() error
	}{
		{"CreatePart new", func() error { _, _, err := s.CreatePart("new.txt", false); return err }},
		{"CreatePart resume", func() error { _, _, err := s.CreatePart("a.txt", true); return err }},
		{"CommitPart", func() error { return s.CommitPart("a.txt", 0o644, time.Now()) }},
		{"RemovePart", func() error { return s.RemovePart("a.txt") }},
		{"Mkdir new", func() error { return s.Mkdir("newdir", 0o755, 0) }},
		{"Mkdir existing", func() error { return s.Mkdir("sub", 0o755, 0) }},
		{"Mkdir root", func() error { return s.Mkdir("", 0o755, 0) }},
		{"Symlink new", func() error { return s.Symlink("l2", "a.txt", 0) }},
		{"Symlink replace", func() error { return s.Symlink("link", "sub", 0) }},
		{"SetAttr", func() error { return setAttr(s, "a.txt", wire.SetMode|wire.SetMtime, 0o777, time.Now()) }},
		{"SetAttr root", func() error { return setAttr(s, "", wire.SetMode, 0o777, time.Now()) }},
	}
	for _, w := range writes {
		err := w.call()
		wantCode(t, w.name, err, wire.EROFS)
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s: %v does not match ErrReadOnly", w.name, err)
		}
		if msg := Message(err); !strings.Contains(msg, "share test is read-only") || !strings.Contains(msg, "ask its owner") {
			t.Errorf("%s: Message %q", w.name, msg)
		}
	}
	// Reads still work.
	if _, err := s.ReadDir(""); err != nil {
		t.Error(err)
	}
	f, _, err := s.OpenRead("a.txt")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	sameSnapshot(t, "share", shareBefore, snapshot(t, fx.shareDir))
	sameSnapshot(t, "outside", outsideBefore, snapshot(t, fx.outside))
}

// TestConcurrent exercises one Share from many goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	fx := newFixture(t, false)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			name := "c" + string(rune('a'+i))
			for range 20 {
				if _, err := fx.s.ReadDir(""); err != nil {
					t.Error(err)
				}
				if f, _, err := fx.s.OpenRead("a.txt"); err == nil {
					f.Close()
				} else {
					t.Error(err)
				}
				f, _, err := fx.s.CreatePart(name, false)
				if err != nil {
					t.Error(err)
					return
				}
				f.WriteString(name)
				f.Close()
				if err := fx.s.CommitPart(name, 0o644, time.Now()); err != nil {
					t.Error(err)
				}
				if _, err := fx.s.Stat("out/canary"); Errno(err) != wire.ErrnoPathRefused {
					t.Errorf("Stat(out/canary) = %v", err)
				}
			}
		})
	}
	wg.Wait()
}
