package watch

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/peerfs/peerfs/internal/wire"
)

// These run where Windows does, and under Wine in scripts/wine-test.sh.

// TestFileIndex: every file has its own nonzero inode number, the same from Lstat through
// os.Root and from Stat of the open file (the two internal/share uses). A directory listing's
// FileInfo carries it too on NTFS, but not under Wine, which leaves FILE_ID_BOTH_DIR_INFO's
// FileId zero; share lists names and Lstats each, so it does not depend on it.
func TestFileIndex(t *testing.T) {
	dir := tempDir(t)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	check(t, os.WriteFile(a, nil, 0o644))
	check(t, os.WriteFile(b, nil, 0o644))
	root, err := os.OpenRoot(dir)
	check(t, err)
	defer root.Close()
	fa, err := root.Lstat("a")
	check(t, err)
	fb, err := root.Lstat("b")
	check(t, err)
	ia, ib := EntryOf(fa).Ino, EntryOf(fb).Ino
	if ia == 0 || ib == 0 || ia == ib {
		t.Fatalf("inode numbers %d and %d, want two distinct nonzero ones", ia, ib)
	}
	f, err := root.Open("a")
	check(t, err)
	defer f.Close()
	fs, err := f.Stat()
	check(t, err)
	if got := EntryOf(fs).Ino; got != ia {
		t.Fatalf("Stat of the open file gives %d, Lstat %d", got, ia)
	}
}

// TestWindowsEvents: the fsnotify watcher over ReadDirectoryChangesW reports files made,
// written, renamed and removed, in new and renamed directories.
func TestWindowsEvents(t *testing.T) {
	dir := tempDir(t)
	r := newReader(t, newHub(t, dir))
	at := func(name string) string { return filepath.Join(dir, filepath.FromSlash(name)) }

	check(t, os.WriteFile(at("a.txt"), []byte("hello"), 0o644))
	r.waitFor(wire.EventChanged, "a.txt", func(e wire.Entry) bool { return e.Size == 5 })
	check(t, os.Rename(at("a.txt"), at("b.txt")))
	r.wait(wire.EventRemoved, "a.txt")
	r.wait(wire.EventChanged, "b.txt")

	check(t, os.MkdirAll(at("d/e"), 0o755))
	check(t, os.WriteFile(at("d/e/x"), nil, 0o644))
	r.wait(wire.EventChanged, "d/e/x")
	check(t, os.Rename(at("d"), at("n")))
	r.wait(wire.EventRemoved, "d")
	r.wait(wire.EventChanged, "n")
	check(t, os.WriteFile(at("n/e/y"), []byte("yy"), 0o644))
	r.waitFor(wire.EventChanged, "n/e/y", func(e wire.Entry) bool { return e.Size == 2 })

	check(t, os.Remove(at("b.txt")))
	r.wait(wire.EventRemoved, "b.txt")
	check(t, os.Remove(at("n/e/y")))
	r.wait(wire.EventRemoved, "n/e/y")
	// Not removing a watched directory: its watch holds a handle, and under Wine (8.0) the
	// directory stays pending deletion, unreported, for as long as the handle is open.
}

// tempDir is t.TempDir whose removal may fail: under Wine (8.0) os.RemoveAll fails with
// "Invalid function" on the FILE_DISPOSITION_INFORMATION_EX it asks for first.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "peerfs-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
