//go:build !fsnotifytest

package watch

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// watchedDirs returns the share-relative paths of the directories below the folder that the
// hub's tree holds; read it once watchLoop is done.
func watchedDirs(h *Hub) map[string]bool {
	watched := map[string]bool{}
	for _, n := range h.w.dirs {
		if p, ok := h.w.path(n); ok && n != h.w.top {
			watched[p] = true
		}
	}
	return watched
}

func TestOverflowRewalks(t *testing.T) {
	dir := t.TempDir()
	check(t, os.Mkdir(filepath.Join(dir, "gone"), 0o755))
	h := newHub(t, dir)
	// Drive the watcher by hand, as watchLoop would, without reading the kernel's queue: what
	// happens meanwhile is lost as it would be in an overflow.
	h.b.init(DefaultDirLimit, MaxBatch)
	h.w.walkAll()
	if h.w.top.kids["gone"] == nil {
		t.Fatal("existing directory not watched")
	}
	check(t, os.Remove(filepath.Join(dir, "gone")))
	check(t, os.MkdirAll(filepath.Join(dir, "late/deeper"), 0o755))
	h.b.note("something")

	h.w.event(-1, unix.IN_Q_OVERFLOW, "")
	if got := show(h.b.take(h.lookup)); !slices.Equal(got, []string{"R "}) {
		t.Fatalf("after overflow: %q, want one rescan of the root", got)
	}
	late := h.w.top.kids["late"]
	if late == nil || late.kids["deeper"] == nil {
		t.Fatal("directory created during the overflow not watched")
	}
	if h.w.top.kids["gone"] != nil {
		t.Fatal("directory removed during the overflow still in the tree")
	}
	for wd, n := range h.w.dirs {
		if _, ok := h.w.path(n); !ok {
			t.Fatalf("watch %d left outside the tree", wd)
		}
	}
}
