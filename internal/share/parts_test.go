package share

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPartExpiry: part files of uploads unchanged for PartExpiry are removed, those left by an
// earlier run when the share opens and those created since by a later sweep; younger parts,
// other files and a directory under a part name stay.
func TestPartExpiry(t *testing.T) {
	dir := t.TempDir()
	mkdirs(t, filepath.Join(dir, "sub"), filepath.Join(dir, ".dir.peerfs-part"))
	old := time.Now().Add(-PartExpiry - time.Hour)
	files := map[string]bool{ // name: expected to remain
		"sub/.old.bin.peerfs-part": false,
		".young.bin.peerfs-part":   true,
		"old.txt":                  true,
	}
	for name := range files {
		writeFile(t, filepath.Join(dir, name), "data", 0o600)
		mtime := old
		if name == ".young.bin.peerfs-part" {
			mtime = time.Now().Add(-time.Hour)
		}
		if err := os.Chtimes(filepath.Join(dir, name), mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open("test", dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	<-s.parts.walked // the walk at open runs beside serving
	for name, stays := range files {
		if _, err := os.Lstat(filepath.Join(dir, name)); (err == nil) != stays {
			t.Errorf("%s: stays %v after the sweep at open (lstat: %v)", name, !stays, err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(dir, ".dir.peerfs-part")); err != nil || !fi.IsDir() {
		t.Errorf("a directory under a part name was touched: %v", err)
	}

	// A part an upload created, then left: the next periodic look removes it once it is old.
	f, _, err := s.CreatePart("later.bin", false)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	part := filepath.Join(dir, ".later.bin.peerfs-part")
	s.sweepKnownParts(time.Now())
	if _, err := os.Lstat(part); err != nil {
		t.Fatalf("a fresh part was removed: %v", err)
	}
	if err := os.Chtimes(part, old, old); err != nil {
		t.Fatal(err)
	}
	s.sweepKnownParts(time.Now())
	if _, err := os.Lstat(part); !os.IsNotExist(err) {
		t.Errorf("a part unchanged for more than %v was kept: %v", PartExpiry, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".young.bin.peerfs-part")); err != nil {
		t.Errorf("a young part found at open was removed: %v", err)
	}
}
