package node_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestMountFsyncDir: fsync of a directory succeeds (git, sqlite and PostgreSQL fsync the
// directory after creating or renaming a file in it) and means its entries are on the owner,
// a file created in it and still open, with nothing written, included.
func TestMountFsyncDir(t *testing.T) {
	m := mountShare(t)
	dir, owned := createdDir(t, m, "d")
	f, err := os.Create(filepath.Join(dir, "new"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatalf("fsync of a directory in the mount: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(owned, "new")); err != nil {
		t.Fatalf("after the directory's fsync the owner lacks the file created in it: %v", err)
	}
	root, err := os.Open(m.mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := root.Sync(); err != nil {
		t.Fatalf("fsync of the mount's root: %v", err)
	}
}

// TestMountModeBits: chmod keeps every mode bit ext4 keeps for the caller: the sticky bit of a
// regular file, and of a directory made with it; a set-group-ID directory passes its group and
// the bit on to what is created in it.
func TestMountModeBits(t *testing.T) {
	m := mountShare(t)
	// A set-group-ID directory of group 4321 on the owner, made before the mount lists it.
	sg := filepath.Join(m.share, "sg")
	if err := os.Mkdir(sg, 0o775); err != nil {
		t.Fatal(err)
	}
	chownOK := os.Chown(sg, -1, 4321) == nil
	dir, owned := createdDir(t, m, "d")
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Chmod(file, 0o1621); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, filepath.Join(owned, "f")} {
		if got := modeOf(t, p); got != 0o1621 {
			t.Errorf("%s after chmod 01621: %#o", p, got)
		}
	}
	if err := syscall.Chmod(file, 0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, filepath.Join(owned, "f")} {
		if got := modeOf(t, p); got != 0 {
			t.Errorf("%s after chmod 0: %#o", p, got)
		}
	}
	if err := syscall.Mkdir(filepath.Join(dir, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	if got := modeOf(t, filepath.Join(owned, "tmp")); got&0o1000 == 0 {
		t.Errorf("mkdir 01777 made %#o on the owner, without the sticky bit", got)
	}
	if !chownOK {
		t.Skip("cannot chown on the owner: the rest needs root")
	}
	if err := syscall.Chmod(filepath.Join(m.mnt, "sg"), 0o2775); err != nil {
		t.Fatal(err)
	}
	if got := modeOf(t, sg); got != 0o2775 {
		t.Fatalf("chmod 02775 of a directory made %#o on the owner", got)
	}
	if err := os.WriteFile(filepath.Join(m.mnt, "sg", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(m.mnt, "sg", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"f", "sub"} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(sg, name), &st); err != nil {
			t.Fatal(err)
		}
		if st.Gid != 4321 {
			t.Errorf("%s created in a set-group-ID directory has group %d on the owner, want 4321", name, st.Gid)
		}
	}
	if got := modeOf(t, filepath.Join(m.mnt, "sg", "sub")); got&0o2000 == 0 {
		t.Errorf("a directory made in a set-group-ID one shows %#o through the mount, without the bit", got)
	}
}

// modeOf returns the permission bits of path (not followed), set-id and sticky included.
func modeOf(t *testing.T, path string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode & 0o7777
}

// TestMountOwnerMkdirAppears: a directory made on the owner under a name the mount just
// answered as missing appears in the mount once its change event arrives; the kernel keeps a
// missing name for 10 s unless the event tells it to forget.
func TestMountOwnerMkdirAppears(t *testing.T) {
	m := mountShare(t)
	p := filepath.Join(m.mnt, "later")
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("stat of a missing name: %v", err)
	}
	if err := os.Mkdir(filepath.Join(m.share, "later"), 0o755); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, err := os.Stat(p)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 s after the owner made a directory the mount still answers %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
