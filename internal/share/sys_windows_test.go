package share

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/wire"
)

// TestRemoveRenameByHandle runs the mount's removals and renames on a Windows owner
// (sys_windows.go) with rename(2) and unlink(2) semantics. It runs where Windows does, and
// under Wine in scripts/wine-test.sh.
func TestRemoveRenameByHandle(t *testing.T) {
	dir := tempDir(t)
	at := func(name string) string { return filepath.Join(dir, filepath.FromSlash(name)) }
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(at(name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"d", "d/sub", "empty", "full", "full/in", "other"} {
		if err := os.Mkdir(at(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "A")
	write("b", "B")
	write("d/f", "F")
	write("full/x", "X")
	outside := filepath.Join(tempDir(t), "canary")
	if err := os.WriteFile(outside, []byte("canary"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open("t", dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	wantCode(t, "unlink a directory", s.Unlink("d"), wire.EISDIR)
	wantCode(t, "rmdir a file", s.Rmdir("a"), wire.ENOTDIR)
	wantCode(t, "rmdir a directory with entries", s.Rmdir("full"), wire.ENOTEMPTY)
	wantCode(t, "unlink a missing name", s.Unlink("missing"), wire.ENOENT)
	wantCode(t, "rename a missing name", s.Rename("missing", "z", 0), wire.ENOENT)
	wantCode(t, "rename refusing to replace", s.Rename("a", "b", wire.RenameNoReplace), wire.EEXIST)
	wantCode(t, "exchange", s.Rename("a", "b", wire.RenameExchange), wire.EINVAL)
	wantCode(t, "a file over a directory", s.Rename("a", "empty", 0), wire.EISDIR)
	wantCode(t, "a directory over a file", s.Rename("empty", "a", 0), wire.ENOTDIR)
	wantCode(t, "a directory over one with entries", s.Rename("empty", "full", 0), wire.ENOTEMPTY)
	if _, err := os.Stat(at("full/x")); err != nil {
		t.Fatalf("a refused rename lost full/x: %v", err)
	}

	wantCode(t, "a file over a file", s.Rename("a", "b", 0), 0)
	if got, _ := os.ReadFile(at("b")); string(got) != "A" {
		t.Fatalf("after renaming a over b, b holds %q", got)
	}
	wantCode(t, "a file into another directory", s.Rename("b", "d/sub/b", 0), 0)
	wantCode(t, "a directory to a new name", s.Rename("d", "e", 0), 0)
	if got, _ := os.ReadFile(at("e/sub/b")); string(got) != "A" {
		t.Fatalf("after renaming d to e, e/sub/b holds %q", got)
	}
	wantCode(t, "a directory over an empty one", s.Rename("e", "empty", 0), 0)
	if _, err := os.Stat(at("empty/f")); err != nil {
		t.Fatalf("after renaming e over empty: %v", err)
	}
	wantCode(t, "a directory into another", s.Rename("other", "empty/other", 0), 0)

	wantCode(t, "unlink a file", s.Unlink("empty/f"), 0)
	wantCode(t, "unlink in a subdirectory", s.Unlink("empty/sub/b"), 0)
	wantCode(t, "rmdir", s.Rmdir("empty/sub"), 0)
	wantCode(t, "rmdir another", s.Rmdir("empty/other"), 0)
	wantCode(t, "rmdir the emptied directory", s.Rmdir("empty"), 0)
	for _, gone := range []string{"a", "d", "e", "empty", "other"} {
		if _, err := os.Lstat(at(gone)); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", gone, err)
		}
	}
	if got, err := os.ReadFile(outside); err != nil || string(got) != "canary" {
		t.Fatalf("the file outside the share changed: %q, %v", got, err)
	}
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

// TestRmdirOfWatchedDirectory: a directory the share's change watching holds a handle on is
// removed at once, not left pending deletion with its name taken (as Wine, FAT and network
// shares would while a handle is open).
func TestRmdirOfWatchedDirectory(t *testing.T) {
	dir := tempDir(t)
	s, err := Open("t", dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sub, err := s.Subscribe(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := os.MkdirAll(filepath.Join(dir, "d", "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	for seen := false; !seen; { // the watcher has placed d/e once it reports it
		select {
		case batch := <-sub.C():
			for _, ev := range batch {
				seen = seen || ev.Path == "d/e"
			}
		case <-time.After(5 * time.Second):
			t.Fatal("d/e never reported")
		}
	}
	wantCode(t, "rmdir d/e", s.Rmdir("d/e"), 0)
	wantCode(t, "rmdir d", s.Rmdir("d"), 0)
	if _, err := os.Lstat(filepath.Join(dir, "d")); !os.IsNotExist(err) {
		t.Fatalf("d still there after its removal: %v", err)
	}
}
