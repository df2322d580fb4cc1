package node_test

import (
	"os"
	"path/filepath"
	"testing"
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
