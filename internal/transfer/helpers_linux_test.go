package transfer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fsKinds are the file systems the full-disk tests run on: ext4 keeps what a failed fallocate
// allocated and holds 5% of its blocks for root; tmpfs honours fallocate and keeps nothing back.
var fsKinds = []string{"ext4", "tmpfs"}

// smallFS mounts a file system of the kind given ("ext4", on a loop device, or "tmpfs") of
// about mib MiB for this test alone and returns its root; it is unmounted at the end. The test
// is skipped, with the reason, where it cannot be mounted (no root, no loop devices).
func smallFS(t *testing.T, kind string, mib int) string {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "fs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	switch kind {
	case "ext4":
		img := filepath.Join(base, "fs.img")
		f, err := os.Create(img)
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(int64(mib) << 20)
		f.Close()
		if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
			t.Skipf("cannot make an ext4 image for a full-disk test: %v: %s", err, out)
		}
		if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
			t.Skipf("cannot mount an ext4 image for a full-disk test (needs root and loop devices): %v: %s", err, out)
		}
	case "tmpfs":
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(mib)+"m"); err != nil {
			t.Skipf("cannot mount a tmpfs for a full-disk test (needs root): %v", err)
		}
	default:
		t.Fatalf("unknown file system kind %q", kind)
	}
	t.Cleanup(func() {
		// A file the owner still holds open (a test that failed mid-transfer) keeps the file
		// system busy for a moment; never leave it mounted.
		err := unix.Unmount(dir, 0)
		for i := 0; err == unix.EBUSY && i < 50; i++ {
			time.Sleep(20 * time.Millisecond)
			err = unix.Unmount(dir, 0)
		}
		if err != nil {
			unix.Unmount(dir, unix.MNT_DETACH)
			t.Errorf("unmounting the test file system: %v (detached it)", err)
		}
	})
	return dir
}

// freeBytes is the free space of dir's file system for unprivileged users.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Frsize)
}
