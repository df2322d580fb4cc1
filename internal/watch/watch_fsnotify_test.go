//go:build linux && fsnotifytest

package watch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/peerfs/peerfs/internal/wire"
)

// These tests, with the portable ones in watch_test.go, run the fsnotify watcher (the one
// macOS, the BSDs and Windows use) on Linux: go test -tags fsnotifytest ./internal/watch/

// watchedDirs returns the share-relative paths of the directories below the folder that the
// hub watches or polls; read it once watchLoop is done.
func watchedDirs(h *Hub) map[string]bool {
	watched := map[string]bool{}
	for p := range h.w.dirs {
		if p != "" {
			watched[p] = true
		}
	}
	return watched
}

// TestPollPastBudget: directories the budget leaves unwatched are polled, and changes in them
// (new files, new subdirectories, writes, removals) still reach the subscriber.
func TestPollPastBudget(t *testing.T) {
	defer func(b int, p time.Duration) { watchBudget, PollInterval = b, p }(watchBudget, PollInterval)
	watchBudget, PollInterval = 2, 50*time.Millisecond // the folder and one directory
	dir := t.TempDir()
	for _, d := range []string{"a", "b", "c/d"} {
		check(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	// Walked by hand first, to see which directories got the budget.
	h := newHub(t, dir)
	h.b.init(DefaultDirLimit, MaxBatch)
	h.w.walkAll()
	watched, polled := 0, 0
	for p, d := range h.w.dirs {
		if p == "" {
			continue
		}
		if d.listed != nil {
			polled++
		} else {
			watched++
		}
	}
	if watched != 1 || polled != 3 {
		t.Fatalf("%d directories watched and %d polled, want 1 and 3", watched, polled)
	}
	h.Close()

	h = newHub(t, dir)
	r := newReader(t, h)
	for _, d := range []string{"a", "b", "c/d"} {
		check(t, os.WriteFile(filepath.Join(dir, d, "f"), []byte("x"), 0o644))
		r.waitFor(wire.EventChanged, d+"/f", func(e wire.Entry) bool { return e.Size == 1 })
	}
	check(t, os.MkdirAll(filepath.Join(dir, "c/d/new/deeper"), 0o755))
	r.wait(wire.EventChanged, "c/d/new/deeper")
	check(t, os.WriteFile(filepath.Join(dir, "c/d/new/deeper/g"), nil, 0o644))
	r.wait(wire.EventChanged, "c/d/new/deeper/g")
	check(t, os.WriteFile(filepath.Join(dir, "c/d/f"), []byte("xyz"), 0o644))
	r.waitFor(wire.EventChanged, "c/d/f", func(e wire.Entry) bool { return e.Size == 3 })
	check(t, os.RemoveAll(filepath.Join(dir, "c")))
	r.wait(wire.EventRemoved, "c")
	h.Close()
	for p := range watchedDirs(h) {
		if p != "a" && p != "b" {
			t.Errorf("%s still watched or polled after its removal", p)
		}
	}
}

// TestFsnotifyOverflowRewalks: after an overflow, directories made meanwhile are watched and
// those removed are forgotten.
func TestFsnotifyOverflowRewalks(t *testing.T) {
	dir := t.TempDir()
	check(t, os.Mkdir(filepath.Join(dir, "gone"), 0o755))
	h := newHub(t, dir)
	// Drive the watcher by hand, as watchLoop would, without reading fsnotify's events: what
	// happens meanwhile is lost as it would be in an overflow.
	h.b.init(DefaultDirLimit, MaxBatch)
	h.w.walkAll()
	if h.w.dirs["gone"] == nil {
		t.Fatal("existing directory not watched")
	}
	check(t, os.Remove(filepath.Join(dir, "gone")))
	check(t, os.MkdirAll(filepath.Join(dir, "late/deeper"), 0o755))
	h.b.note("something")

	h.b.rescanAll()
	h.w.unwatch("")
	h.w.walkAll()
	if got := show(h.b.take(h.lookup)); !slices.Equal(got, []string{"R "}) {
		t.Fatalf("after overflow: %q, want one rescan of the root", got)
	}
	if got := watchedDirs(h); !got["late"] || !got["late/deeper"] || got["gone"] || len(got) != 2 {
		t.Fatalf("watched after overflow: %v, want late and late/deeper", got)
	}
	if h.w.spent != 3 {
		t.Fatalf("budget spent %d, want 3 (the folder and two directories)", h.w.spent)
	}
}

// TestPumpNeverBlocksFsnotify: fsnotify hands over events without waiting for watchLoop (on
// Windows its goroutine also serves Add, so waiting would deadlock a walk), and a backlog past
// maxQueued becomes one overflow followed by what came after it.
func TestPumpNeverBlocksFsnotify(t *testing.T) {
	events, errs := make(chan fsnotify.Event), make(chan error)
	h := &Hub{}
	w := &watcher{h: h, fw: &fsnotify.Watcher{Events: events, Errors: errs}, queued: make(chan queued)}
	h.loops.Add(1)
	go w.pumpLoop()
	const after = 10
	for i := range maxQueued + 1 + after { // nothing reads w.queued meanwhile
		select {
		case events <- fsnotify.Event{Name: fmt.Sprint(i), Op: fsnotify.Write}:
		case <-time.After(waitLimit):
			t.Fatalf("fsnotify blocked handing over event %d", i)
		}
	}
	first := <-w.queued
	if !errors.Is(first.err, fsnotify.ErrEventOverflow) {
		t.Fatalf("first queued item %+v, want the overflow", first)
	}
	for i := range after {
		q := <-w.queued
		if want := fmt.Sprint(maxQueued + 1 + i); q.err != nil || q.ev.Name != want {
			t.Fatalf("queued item %+v, want event %s", q, want)
		}
	}
	errs <- fsnotify.ErrEventOverflow
	if q := <-w.queued; !errors.Is(q.err, fsnotify.ErrEventOverflow) {
		t.Fatalf("fsnotify's overflow queued as %+v", q)
	}
	close(events)
	close(errs)
	if _, ok := <-w.queued; ok {
		t.Fatal("queue still open after fsnotify closed")
	}
	h.loops.Wait()
}

// TestRelease: Release drops the watches at a path and below; its rewatch places them again
// where the directory is still there, and not where it was removed.
func TestRelease(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"keep/sub", "gone/sub"} {
		check(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	h := newHub(t, dir)
	r := newReader(t, h)
	rewatch := h.Release("keep")
	rewatch() // the removal failed: keep is there
	rewatch = h.Release("gone")
	check(t, os.RemoveAll(filepath.Join(dir, "gone")))
	rewatch()
	r.wait(wire.EventRemoved, "gone")
	check(t, os.WriteFile(filepath.Join(dir, "keep/sub/f"), nil, 0o644))
	r.wait(wire.EventChanged, "keep/sub/f")
	h.Close()
	if got := watchedDirs(h); len(got) != 2 || !got["keep"] || !got["keep/sub"] {
		t.Fatalf("watched after the releases: %v, want keep and keep/sub", got)
	}
	h.Release("keep")() // after Close: returns at once
}
