package rootfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// TestIsEscape: every way os.Root refuses a name that leads outside is recognised, by the
// error's value: an ordinary failure, or another error that merely has the same text, is not.
func TestIsEscape(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "root")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, name := range []string{"../x", "/x", "up/x", "sub/../../x"} {
		_, err := r.Stat(name)
		if !IsEscape(err) {
			t.Errorf("Stat(%q) = %v: not recognised as an escape", name, err)
		}
		if wrapped := fmt.Errorf("pulling: %w", err); !IsEscape(wrapped) {
			t.Errorf("Stat(%q) wrapped: not recognised as an escape", name)
		}
	}
	if err := r.Rename("f", "up/f"); !IsEscape(err) {
		t.Errorf("Rename out = %v: not recognised as an escape", err)
	}
	_, missing := r.Stat("missing")
	text := escapeErr().Error()
	for _, err := range []error{
		nil, missing, syscall.ENOENT, fs.ErrNotExist,
		&fs.PathError{Op: "statat", Path: "../x", Err: errors.New(text)},
		fmt.Errorf("%s: %w", text, syscall.ENOENT),
	} {
		if IsEscape(err) {
			t.Errorf("IsEscape(%v) = true", err)
		}
	}
}

func TestPartName(t *testing.T) {
	for _, tt := range []struct{ dir, base, want string }{
		{"", "a.txt", ".a.txt.peerfs-part"},
		{".", "a.txt", ".a.txt.peerfs-part"},
		{"sub/deep", "b", "sub/deep/.b.peerfs-part"},
	} {
		got := PartName(tt.dir, tt.base)
		if got != tt.want {
			t.Errorf("PartName(%q, %q) = %q, want %q", tt.dir, tt.base, got, tt.want)
		}
		if !IsPartName(filepath.Base(got)) {
			t.Errorf("IsPartName(%q) = false", filepath.Base(got))
		}
	}
	for _, base := range []string{"a.txt", "a.peerfs-part", ".peerfs-part", ".a.peerfs-part.bak"} {
		if IsPartName(base) {
			t.Errorf("IsPartName(%q) = true", base)
		}
	}
}

// TestSyncDir syncs real directories; a name that is not one is refused, not opened.
func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, d := range []string{"", ".", "sub"} {
		if err := SyncDir(r, d); err != nil {
			t.Errorf("SyncDir(%q): %v", d, err)
		}
	}
	if err := SyncDir(r, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SyncDir(missing) = %v, want not exist", err)
	}
	if runtime.GOOS != "windows" {
		if err := SyncDir(r, "f"); !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("SyncDir(a file) = %v, want ENOTDIR", err)
		}
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state")
	for _, content := range []string{"first", "second, longer than the first"} {
		if err := WriteFileAtomic(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("read back %q, %v; want %q", got, err, content)
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
		}
	}
	if names, _ := os.ReadDir(dir); len(names) != 1 {
		t.Fatalf("left beside it: %v", names)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "state"), nil); err == nil {
		t.Fatal("a file in a missing folder was written")
	}
}
