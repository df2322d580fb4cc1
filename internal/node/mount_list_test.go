//go:build linux

package node_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMountListsFolderLargerThanReplyBudget: a folder whose listing is several times what
// the link lets one exchange queue unread (rpc.MaxQueuedBytes, 32 MiB of frame buffers) lists
// in full through the mount. The owner sends the listing faster than the mount decodes it;
// without credit on the reply frames the mount's link closed as a protocol violation and ls
// failed with EIO.
func TestMountListsFolderLargerThanReplyBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 300,000 files: not in -short")
	}
	m := mountShare(t)
	const n = 300_000
	dir := filepath.Join(m.share, "big")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Names of 60 bytes: about 130 bytes an entry on the wire, 40 MB for the listing.
	for i := range n {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("entry-%054d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	f, err := os.Open(filepath.Join(m.mnt, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		t.Fatalf("listing %d files through the mount: %v after %d names", n, err, len(names))
	}
	if len(names) != n {
		t.Fatalf("the mount lists %d names, want %d", len(names), n)
	}
}

// TestMountLongListingAsksNoXattrPerEntry: ls -l asks for every entry's SELinux label and
// POSIX ACL. A share serves neither (only user.* attributes), and the mount says so with
// EOPNOTSUPP, which ls remembers for the whole file system, instead of ENODATA, which it
// asks again for the next entry: each cost a FUSE request per entry. User attributes still
// work through the mount afterwards (the kernel turns getxattr off only on ENOSYS).
func TestMountLongListingAsksNoXattrPerEntry(t *testing.T) {
	ls, err := exec.LookPath("ls")
	if err != nil {
		t.Skip("no ls")
	}
	m := mountShare(t)
	const n = 200
	dir := filepath.Join(m.share, "many")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := opCalls(t, m, "xattr")
	if out, err := exec.Command(ls, "-l", filepath.Join(m.mnt, "many")).CombinedOutput(); err != nil {
		t.Fatalf("ls -l: %v: %s", err, out)
	}
	if got := opCalls(t, m, "xattr") - before; got > 4 {
		t.Errorf("ls -l of %d files sent %d extended attribute requests, want at most 4", n, got)
	}
	buf := make([]byte, 64)
	if _, err := unix.Lgetxattr(filepath.Join(m.mnt, "many", "f1"), "security.selinux", buf); err != unix.EOPNOTSUPP {
		t.Errorf("security.selinux through the mount: %v, want EOPNOTSUPP", err)
	}
	p := filepath.Join(m.mnt, "many", "f2")
	if err := unix.Lsetxattr(p, "user.note", []byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	if k, err := unix.Lgetxattr(p, "user.note", buf); err != nil || string(buf[:k]) != "kept" {
		t.Fatalf("user.note through the mount after ls -l: %q, %v", buf[:max(k, 0)], err)
	}
	// exec asks for security.capability: EOPNOTSUPP means none, as on a file system
	// without extended attributes.
	if out, err := exec.Command("sh", "-c", "cp \"$0\" \"$1\" && \"$1\"", ls, filepath.Join(m.mnt, "ls")).CombinedOutput(); err != nil {
		t.Fatalf("running a program from the mount: %v: %s", err, out)
	}
}
