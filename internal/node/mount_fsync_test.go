//go:build linux

package node_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMountFsyncDirCreatesOpenFiles: fsync of a directory through a mount syncs it on the owner, as a program
// that makes a new file durable expects (write a temporary file, fsync it, rename it, fsync
// the directory). A file created and still open, not sent yet, is on the owner once the fsync
// of its directory returns.
func TestMountFsyncDirCreatesOpenFiles(t *testing.T) {
	m := mountShare(t)
	tmp, final := filepath.Join(m.mnt, "f.tmp"), filepath.Join(m.mnt, "f")
	if err := os.WriteFile(tmp, []byte("durable"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, final); err != nil {
		t.Fatal(err)
	}
	open, err := os.Create(filepath.Join(m.mnt, "open"))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	d, err := os.Open(m.mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatalf("fsync of the mount's directory: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(m.share, "f")); err != nil || string(b) != "durable" {
		t.Errorf("the renamed file on the owner after fsync of its directory: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(m.share, "open")); err != nil {
		t.Errorf("a file created and still open is not on the owner after fsync of its directory: %v", err)
	}
}
