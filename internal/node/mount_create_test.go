//go:build linux

package node_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// createdDir makes a folder through the mount, where files created later are created on the
// owner with their first data (fusefs/create.go), and returns its paths in the mount and on
// the owner.
func createdDir(t *testing.T, m *mounted, name string) (mnt, owner string) {
	t.Helper()
	if err := os.Mkdir(filepath.Join(m.mnt, name), 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(m.mnt, name), filepath.Join(m.share, name)
}

// ownerHas checks that the owner holds want at path. With --writes sync it waits for nothing:
// close returned, so the owner must hold it already. A journaling mount's changes reach the
// owner by themselves a moment later: it waits up to 10 s for them.
func ownerHas(t *testing.T, path string, want []byte) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := os.ReadFile(path)
		if err == nil && bytes.Equal(got, want) {
			return
		}
		if !testJournaling() || time.Now().After(deadline) {
			t.Fatalf("owner's %s: %q, %v; want %q", filepath.Base(path), got, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testJournaling says the mount tests run against journaling mounts (PEERFS_TEST_WRITES=journal,
// make test's second pass), whose changes reach the owner after close.
func testJournaling() bool { return os.Getenv("PEERFS_TEST_WRITES") == "journal" }

// TestMountCreateOneRoundTrip: creating, writing and closing a small file through the mount
// costs one round trip, the CREATE that carries its data, and the file is on the owner, with
// its mode, when close returns.
func TestMountCreateOneRoundTrip(t *testing.T) {
	m := mountShare(t)
	dir, owned := createdDir(t, m, "src")
	const n = 20
	trips, local := counter(t, m, "round_trips"), counter(t, m, "local_creates")
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), []byte(fmt.Sprint("contents ", i)), 0o640); err != nil {
			t.Fatal(err)
		}
		ownerHas(t, filepath.Join(owned, fmt.Sprint("f", i)), []byte(fmt.Sprint("contents ", i)))
	}
	if got := counter(t, m, "round_trips") - trips; got != n {
		t.Errorf("creating and writing %d small files made %d round trips, want %d", n, got, n)
	}
	if got := counter(t, m, "local_creates") - local; got != n {
		t.Errorf("local_creates counted %d, want %d", got, n)
	}
	fi, err := os.Stat(filepath.Join(owned, "f0"))
	if err != nil || fi.Mode().Perm()&0o600 != 0o600 || fi.Mode().Perm()&0o007 != 0 {
		t.Fatalf("owner's f0: %v, %v; want mode 0640 under the owner's umask", fi, err)
	}
	// An empty file is created at its close.
	f, err := os.Create(filepath.Join(dir, "empty"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ownerHas(t, filepath.Join(owned, "empty"), []byte{})
}

// TestMountCreateThenOperate: a file created through the mount and still open (maybe not on
// the owner yet) takes every operation a local file does, and the owner ends up with what a
// local disk would hold: chmod, stat (one inode number throughout), listing, rename, link,
// unlink, xattrs, fsync, and rmdir of its folder refused.
func TestMountCreateThenOperate(t *testing.T) {
	m := mountShare(t)
	dir, owned := createdDir(t, m, "ops")

	// chmod and fstat while open; the listing shows the file; its inode number holds.
	f, err := os.OpenFile(filepath.Join(dir, "a"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("abc"); err != nil {
		t.Fatal(err)
	}
	if err := f.Chmod(0o600); err != nil {
		t.Fatal(err)
	}
	open, err := f.Stat()
	if err != nil || open.Size() != 3 || open.Mode().Perm() != 0o600 {
		t.Fatalf("fstat while open: %v, %v", open, err)
	}
	names, err := os.ReadDir(dir)
	if err != nil || len(names) != 1 || names[0].Name() != "a" {
		t.Fatalf("listing while open: %v, %v", names, err)
	}
	if err := syscall.Rmdir(dir); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir of a folder with a file open in it: %v, want ENOTEMPTY", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ownerHas(t, filepath.Join(owned, "a"), []byte("abc"))
	if fi, err := os.Stat(filepath.Join(owned, "a")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("owner's a: %v, %v; want mode 0600", fi, err)
	}
	closed, err := os.Stat(filepath.Join(dir, "a"))
	if err != nil || !os.SameFile(open, closed) {
		t.Fatalf("stat after close: %v, %v; want the inode fstat showed while open", closed, err)
	}

	// Rename while open, then write more.
	f, err = os.Create(filepath.Join(dir, "r1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("before "); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "r1"), filepath.Join(dir, "r2")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("after"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ownerHas(t, filepath.Join(owned, "r2"), []byte("before after"))
	if _, err := os.Lstat(filepath.Join(owned, "r1")); !os.IsNotExist(err) {
		t.Fatalf("owner's r1 after the rename: %v", err)
	}

	// A hard link while open: both names are one file, here and on the owner.
	f, err = os.Create(filepath.Join(dir, "l1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "l1"), filepath.Join(dir, "l2")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("linked"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ownerHas(t, filepath.Join(owned, "l2"), []byte("linked"))
	o1, _ := os.Stat(filepath.Join(owned, "l1"))
	o2, _ := os.Stat(filepath.Join(owned, "l2"))
	m1, _ := os.Stat(filepath.Join(dir, "l1"))
	m2, _ := os.Stat(filepath.Join(dir, "l2"))
	if o1 == nil || o2 == nil || !os.SameFile(o1, o2) || m1 == nil || m2 == nil || !os.SameFile(m1, m2) {
		t.Fatalf("l1 and l2 are not one file: owner %v %v, mount %v %v", o1, o2, m1, m2)
	}

	// Unlinked while open: written to the end, then gone everywhere.
	f, err = os.Create(filepath.Join(dir, "u"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("doomed"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "u")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(" still writable"); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	// An xattr set while open, and fsync.
	f, err = os.Create(filepath.Join(dir, "x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.Getxattr(filepath.Join(dir, "x"), "user.k", make([]byte, 16)); !errors.Is(err, syscall.ENODATA) {
		t.Fatalf("getxattr of a new file: %v, want ENODATA", err)
	}
	if err := syscall.Setxattr(filepath.Join(dir, "x"), "user.k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("x"); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	ownerHas(t, filepath.Join(owned, "x"), []byte("x"))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	v := make([]byte, 16)
	if n, err := syscall.Getxattr(filepath.Join(owned, "x"), "user.k", v); err != nil || string(v[:n]) != "v" {
		t.Fatalf("owner's user.k: %q, %v", v[:n], err)
	}

	time.Sleep(300 * time.Millisecond) // the owner's events for all this arrive
	left, err := os.ReadDir(owned)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range left {
		got = append(got, e.Name())
	}
	if fmt.Sprint(got) != "[a l1 l2 r2 x]" {
		t.Errorf("owner's folder holds %v, want [a l1 l2 r2 x]", got)
	}
	listed, err := os.ReadDir(dir)
	if err != nil || len(listed) != len(got) {
		t.Errorf("the mount lists %v, %v; want %v", listed, err, got)
	}
}

// TestMountCreateNameTakenOnOwner: a name taken on the owner after the mount last heard of
// the folder: an exclusive create through the mount fails, at open or at close, and the
// owner's file keeps its contents. Nothing is silently lost or overwritten.
func TestMountCreateNameTakenOnOwner(t *testing.T) {
	m := mountShare(t)
	dir, owned := createdDir(t, m, "race")
	for i := range 20 {
		name := fmt.Sprint("taken", i)
		if err := os.WriteFile(filepath.Join(owned, name), []byte("theirs"), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			_, err = f.WriteString("mine")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if !errors.Is(err, syscall.EEXIST) {
			t.Errorf("%s: exclusive create of a name the owner just took: %v, want EEXIST at open or close", name, err)
		}
		ownerHas(t, filepath.Join(owned, name), []byte("theirs"))
	}
}

// TestMountMkdirSymlinkNameTakenOnOwner: mkdir and symlink through the mount of names another
// device made on the owner a moment before, before its change event can have arrived, fail
// with EEXIST as on a local disk: a directory made as a lock stays one device's, and the
// other device's link keeps its target. The mount then shows the owner's objects.
func TestMountMkdirSymlinkNameTakenOnOwner(t *testing.T) {
	m := mountShare(t)
	dir, owned := createdDir(t, m, "race")
	for i := range 20 {
		name := fmt.Sprint("lock", i)
		if err := os.Mkdir(filepath.Join(owned, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); !errors.Is(err, syscall.EEXIST) {
			t.Errorf("mkdir %s, which the owner just made: %v, want EEXIST", name, err)
		}
		link := fmt.Sprint("link", i)
		if err := os.Symlink("theirs", filepath.Join(owned, link)); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("mine", filepath.Join(dir, link)); !errors.Is(err, syscall.EEXIST) {
			t.Errorf("symlink %s, which the owner just made: %v, want EEXIST", link, err)
		}
		if got, err := os.Readlink(filepath.Join(owned, link)); err != nil || got != "theirs" {
			t.Errorf("owner's %s -> %q, %v; want theirs", link, got, err)
		}
	}
	// The owner's directory and link show through the mount once their events arrive.
	deadline := time.Now().Add(5 * time.Second)
	for {
		fi, err := os.Lstat(filepath.Join(dir, "lock19"))
		target, lerr := os.Readlink(filepath.Join(dir, "link19"))
		if err == nil && fi.IsDir() && fi.Mode().Perm() == 0o700 && lerr == nil && target == "theirs" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("through the mount: lock19 %v, %v; link19 -> %q, %v", fi, err, target, lerr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMountCreateRecreateReachesOwner: a file created with open(O_CREAT|O_RDONLY) and closed
// with nothing written is on the owner when close returns, also when its name was just
// unlinked, and the mount and the owner still agree once the unlink's change event came back
// (such a file once stayed in the mount only, and vanished from it at that event).
func TestMountCreateRecreateReachesOwner(t *testing.T) {
	m := mountShare(t)
	dir, owned := createdDir(t, m, "locks")
	p := filepath.Join(dir, "lock")
	for i := range 3 {
		f, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		ownerHas(t, filepath.Join(owned, "lock"), []byte{})
		if i < 2 {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(1500 * time.Millisecond) // the unlinks' change events arrive meanwhile
	if _, err := os.Stat(p); err != nil {
		t.Errorf("the mount lost the file: %v", err)
	}
	ownerHas(t, filepath.Join(owned, "lock"), []byte{})
}

// TestMountPathLimit: a name whose path from the share's root would pass what the protocol
// carries (PATH_MAX, 4096 bytes) is refused at once with ENAMETOOLONG, by create, mkdir,
// symlink, link and rename, and a file at exactly the limit works. Such a file was once
// accepted by the mount and lost at its close with EIO.
func TestMountPathLimit(t *testing.T) {
	m := mountShare(t)
	dir, _ := createdDir(t, m, "deep")
	rel := "deep"
	for i := 0; 4096-len(rel)-1 > 255; i++ {
		name := strings.Repeat(string(rune('a'+i)), 250)
		dir, rel = filepath.Join(dir, name), rel+"/"+name
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fits := strings.Repeat("f", 4096-len(rel)-1) // share path of exactly 4096 bytes
	// Names relative to the deepest directory: the mount's own path adds to the full one.
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	at := int(d.Fd())
	fd, err := unix.Openat(at, fits, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatalf("a file whose share path is 4096 bytes: %v", errnoOf(err))
	}
	unix.Write(fd, []byte("fits"))
	if err := unix.Close(fd); err != nil {
		t.Fatalf("closing it: %v", errnoOf(err))
	}
	owned, err := os.OpenRoot(filepath.Join(m.share, "deep"))
	if err != nil {
		t.Fatal(err)
	}
	defer owned.Close()
	ownerHasAt := func() {
		t.Helper()
		if got, err := owned.ReadFile(strings.TrimPrefix(rel, "deep/") + "/" + fits); err != nil || string(got) != "fits" {
			t.Fatalf("the owner's file at the limit: %q, %v", got, errnoOf(err))
		}
	}
	ownerHasAt()
	long := fits + "x"
	if _, err := unix.Openat(at, long, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Errorf("create past the limit: %v, want ENAMETOOLONG", errnoOf(err))
	}
	if err := unix.Mkdirat(at, long, 0o755); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Errorf("mkdir past the limit: %v, want ENAMETOOLONG", errnoOf(err))
	}
	if err := unix.Symlinkat("t", at, long); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Errorf("symlink past the limit: %v, want ENAMETOOLONG", errnoOf(err))
	}
	if err := unix.Linkat(at, fits, at, long, 0); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Errorf("link past the limit: %v, want ENAMETOOLONG", errnoOf(err))
	}
	if err := unix.Renameat(at, fits, at, long); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Errorf("rename past the limit: %v, want ENAMETOOLONG", errnoOf(err))
	}
	ownerHasAt()
}

// errnoOf is the errno inside err, or err itself: a path of 4 KiB makes messages unreadable.
func errnoOf(err error) any {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}
