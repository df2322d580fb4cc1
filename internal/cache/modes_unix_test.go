//go:build unix

package cache

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestModes checks that directories are 0700 and files 0600 whatever the umask, and that a
// cache directory made with looser modes is tightened.
func TestModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o777); err != nil {
		t.Fatal(err)
	}
	s, _ := openStore(t, dir, 0)
	f := get(t, s, testKey, Version{Size: cs})
	writeChunks(t, f, 0)
	f.Release()
	if err := s.flush(flushAll); err != nil {
		t.Fatal(err)
	}

	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = fs.ModeDir | 0o700
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
		seen[filepath.Ext(p)] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk saw the lock file, a data file and a record.
	if !seen[".map"] || len(dataFiles(t, dir)) != 2 {
		t.Fatalf("walk missed files: %v", seen)
	}
}
