//go:build linux

package watch

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/wire"
)

// entryAt is the entry a peer should see for the file at p.
func entryAt(t *testing.T, p string) wire.Entry {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	e := EntryOf(fi)
	if e.IsSymlink() {
		e.Target, _ = os.Readlink(p)
	}
	return e
}

func TestFileEvents(t *testing.T) {
	dir := t.TempDir()
	r := newReader(t, newHub(t, dir))
	at := func(name string) string { return filepath.Join(dir, name) }

	check(t, os.WriteFile(at("a.txt"), []byte("hello"), 0o644))
	ev := r.waitFor(wire.EventChanged, "a.txt", func(e wire.Entry) bool { return e.Size == 5 })
	if want := entryAt(t, at("a.txt")); !reflect.DeepEqual(ev.Entry, want) {
		t.Fatalf("create: entry %+v, want %+v", ev.Entry, want)
	}
	r.wait(wire.EventChanged, "") // the share root's mtime moved with it

	f, err := os.OpenFile(at("a.txt"), os.O_WRONLY|os.O_APPEND, 0)
	check(t, err)
	_, err = f.WriteString(", world")
	check(t, err)
	check(t, f.Close())
	r.waitFor(wire.EventChanged, "a.txt", func(e wire.Entry) bool { return e.Size == 12 })

	check(t, os.Chmod(at("a.txt"), 0o600))
	ev = r.waitFor(wire.EventChanged, "a.txt", func(e wire.Entry) bool { return e.Mode == wire.ModeRegular|0o600 })
	if want := entryAt(t, at("a.txt")); !reflect.DeepEqual(ev.Entry, want) {
		t.Fatalf("chmod: entry %+v, want %+v", ev.Entry, want)
	}

	check(t, os.Rename(at("a.txt"), at("b.txt")))
	r.wait(wire.EventRemoved, "a.txt") // before the new name: order of occurrence
	if ev = r.wait(wire.EventChanged, "b.txt"); ev.Entry.Mode != wire.ModeRegular|0o600 || ev.Entry.Size != 12 {
		t.Fatalf("renamed: entry %+v", ev.Entry)
	}

	check(t, os.Symlink("b.txt", at("link")))
	if ev = r.wait(wire.EventChanged, "link"); !ev.Entry.IsSymlink() || ev.Entry.Target != "b.txt" {
		t.Fatalf("symlink: entry %+v", ev.Entry)
	}
	check(t, os.Symlink("/etc", at("out")))
	if ev = r.wait(wire.EventChanged, "out"); !ev.Entry.IsSymlink() || ev.Entry.Target != "/etc" {
		t.Fatalf("symlink out: entry %+v, want the link itself", ev.Entry)
	}

	check(t, os.Remove(at("b.txt")))
	r.wait(wire.EventRemoved, "b.txt")
}

func TestNewDirectoriesAreWatched(t *testing.T) {
	dir := t.TempDir()
	r := newReader(t, newHub(t, dir))
	at := func(name string) string { return filepath.Join(dir, filepath.FromSlash(name)) }

	// Files created right after mkdir, before the hub can have placed its watch, are found by
	// the scan of the new directory; later ones by its watch. Repeated to meet the race.
	for i := range 10 {
		d := fmt.Sprintf("d%d/e/f", i)
		check(t, os.MkdirAll(at(d), 0o755))
		check(t, os.WriteFile(at(d+"/x"), nil, 0o644))
		r.wait(wire.EventChanged, d+"/x")
		check(t, os.WriteFile(at(d+"/y"), nil, 0o644))
		r.wait(wire.EventChanged, d+"/y")
	}

	// A renamed directory keeps being watched under its new name, and nothing is reported
	// under the old one.
	check(t, os.MkdirAll(at("m/sub"), 0o755))
	r.wait(wire.EventChanged, "m/sub")
	check(t, os.Rename(at("m"), at("n")))
	r.wait(wire.EventRemoved, "m")
	r.wait(wire.EventChanged, "n")
	check(t, os.WriteFile(at("n/sub/y"), nil, 0o644))
	r.wait(wire.EventChanged, "n/sub/y")

	// A tree moved in from outside is watched; one moved out is no longer reported.
	outside := t.TempDir()
	check(t, os.MkdirAll(filepath.Join(outside, "t/sub"), 0o755))
	check(t, os.Rename(filepath.Join(outside, "t"), at("in")))
	r.wait(wire.EventChanged, "in")
	check(t, os.WriteFile(at("in/sub/q"), nil, 0o644))
	r.wait(wire.EventChanged, "in/sub/q")

	check(t, os.Rename(at("n"), filepath.Join(outside, "n")))
	r.wait(wire.EventRemoved, "n")
	check(t, os.WriteFile(filepath.Join(outside, "n/sub/z"), nil, 0o644))
	check(t, os.WriteFile(at("marker"), nil, 0o644))
	r.wait(wire.EventChanged, "marker")
	for _, ev := range r.seen {
		if strings.HasSuffix(ev.Path, "/z") {
			t.Fatalf("a change outside the share was reported as %q", ev.Path)
		}
	}

	check(t, os.RemoveAll(at("in")))
	r.wait(wire.EventRemoved, "in/sub/q")
	r.wait(wire.EventRemoved, "in")
}

func TestBurstCoalesced(t *testing.T) {
	const n = 1000
	dir := t.TempDir()
	r := newReader(t, newHub(t, dir))
	check(t, os.Mkdir(filepath.Join(dir, "burst"), 0o755))
	r.wait(wire.EventChanged, "burst")
	r.seen, r.pos = nil, 0

	for i := range n {
		check(t, os.WriteFile(filepath.Join(dir, "burst", fmt.Sprintf("f%04d", i)), []byte("x"), 0o644))
	}
	// Each file must be covered: by an event of its own, or by a rescan of the directory or
	// the root that came after it.
	pending := make(map[string]bool, n)
	for i := range n {
		pending[fmt.Sprintf("burst/f%04d", i)] = true
	}
	deadline := time.After(waitLimit)
	batches := 0
	for len(pending) > 0 {
		select {
		case batch := <-r.sub.C():
			batches++
			r.seen = append(r.seen, batch...)
			for _, ev := range batch {
				switch {
				case ev.Kind == wire.EventRescan && (ev.Path == "burst" || ev.Path == ""):
					clear(pending)
				case ev.Kind == wire.EventChanged:
					delete(pending, ev.Path)
				}
			}
		case <-deadline:
			t.Fatalf("%d files never reported; saw %d events in %d batches", len(pending), len(r.seen), batches)
		}
	}
	// Bounds: a file may appear once for its creation and once for its write when the two
	// fall into different batches, and each batch may add the directory itself.
	if len(r.seen) > 2*n+2*batches {
		t.Fatalf("%d events in %d batches for %d files", len(r.seen), batches, n)
	}
	rescans := 0
	for _, ev := range r.seen {
		if ev.Kind == wire.EventRescan {
			rescans++
		}
	}
	t.Logf("%d files: %d events (%d rescans) in %d batches", n, len(r.seen), rescans, batches)
}

func TestSlowSubscriberGetsRescan(t *testing.T) {
	dir := t.TempDir()
	h := newHub(t, dir)
	h.QueueLen = 4
	slow := h.Subscribe() // never read until the end
	fast := &reader{t: t, sub: h.Subscribe()}

	// Each change is delivered before the next is made, so each is a batch of its own.
	const changes = 20
	for i := range changes {
		name := fmt.Sprintf("f%d", i)
		check(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
		fast.wait(wire.EventChanged, name)
	}

	var queued [][]wire.Event
	for len(slow.C()) > 0 {
		queued = append(queued, <-slow.C())
	}
	if len(queued) == 0 || len(queued) > h.QueueLen {
		t.Fatalf("slow subscriber holds %d batches, want 1..%d", len(queued), h.QueueLen)
	}
	rescan := slices.IndexFunc(queued, func(b []wire.Event) bool {
		return len(b) == 1 && b[0].Kind == wire.EventRescan && b[0].Path == ""
	})
	if rescan < 0 {
		t.Fatalf("slow subscriber's queue has no rescan of the root: %d batches", len(queued))
	}
	// The last change reached the slow subscriber too: in its newest batch, or covered by the
	// rescan if that is the newest.
	if got := show(queued[len(queued)-1]); !slices.Equal(got, []string{"R "}) && !slices.Contains(got, fmt.Sprintf("C f%d", changes-1)) {
		t.Fatalf("newest batch %q neither a rescan nor the last change", got)
	}
}

// loops counts the running watchLoop goroutines once the count equals want or a while has
// passed: a loop that has signalled its end may still be returning.
func loops(want int) int {
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(waitLimit)
	for {
		n := strings.Count(string(buf[:runtime.Stack(buf, true)]), "watch.(*Hub).watchLoop(")
		if n == want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCloseEndsEverything(t *testing.T) {
	base := loops(0)
	dir := t.TempDir()
	h, err := New(dir, nil)
	check(t, err)
	a, b := h.Subscribe(), h.Subscribe()
	if n := loops(base + 1); n != base+1 {
		t.Fatalf("%d watchLoops running, want %d", n, base+1)
	}
	b.Close()
	b.Close()
	if _, ok := <-b.C(); ok {
		t.Fatal("closed subscriber still open")
	}
	check(t, os.WriteFile(filepath.Join(dir, "f"), nil, 0o644))
	h.Close()
	h.Close()
	for range a.C() { // drains what came before Close, then ends
	}
	if n := loops(base); n != base {
		t.Fatalf("%d watchLoops after Close, want %d", n, base)
	}
	if _, ok := <-h.Subscribe().C(); ok {
		t.Fatal("Subscribe after Close returned an open subscriber")
	}

	// A hub closed before its first Subscribe starts nothing.
	h2, err := New(dir, nil)
	check(t, err)
	h2.Close()
	if _, ok := <-h2.Subscribe().C(); ok || loops(base) != base {
		t.Fatal("hub closed before use started watching")
	}
}

// TestTreeFollowsChurn makes, renames and removes directories in a random order, then checks
// that the watched tree is exactly the tree on disk.
func TestTreeFollowsChurn(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { churn(t, seed) })
	}
}

func churn(t *testing.T, seed uint64) {
	dir := t.TempDir()
	h := newHub(t, dir)
	r := newReader(t, h)
	outside := t.TempDir()
	rng := rand.New(rand.NewPCG(seed, 2))
	var dirs []string // relative directories that may exist
	pick := func() string {
		if len(dirs) == 0 || rng.IntN(4) == 0 {
			return ""
		}
		return dirs[rng.IntN(len(dirs))]
	}
	for i := range 400 {
		at := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
		switch rng.IntN(5) {
		case 0, 1:
			d := wire.Join(pick(), fmt.Sprintf("d%d", i))
			if os.MkdirAll(at(d+"/x"), 0o755) == nil {
				dirs = append(dirs, d, d+"/x")
			}
		case 2:
			from, to := pick(), wire.Join(pick(), fmt.Sprintf("r%d", i))
			if from != "" && os.Rename(at(from), at(to)) == nil {
				dirs = append(dirs, to)
			}
		case 3:
			if d := pick(); d != "" {
				os.RemoveAll(at(d))
			}
		case 4:
			if d := pick(); d != "" {
				os.Rename(at(d), filepath.Join(outside, fmt.Sprintf("o%d", i)))
			}
		}
	}
	check(t, os.WriteFile(filepath.Join(dir, "marker"), nil, 0o644))
	r.wait(wire.EventChanged, "marker")
	h.Close() // watchLoop is done: its tree can be read

	onDisk := map[string]bool{}
	check(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != dir {
			rel, _ := filepath.Rel(dir, p)
			onDisk[filepath.ToSlash(rel)] = true
		}
		return err
	}))
	watched := watchedDirs(h)
	for p := range onDisk {
		if !watched[p] {
			t.Errorf("%s not watched", p)
		}
	}
	for p := range watched {
		if !onDisk[p] {
			t.Errorf("%s watched but not on disk", p)
		}
	}
	t.Logf("%d directories on disk, %d watched", len(onDisk), len(watched))
}

// TestFolderThroughSymlink: a folder shared by a path that is itself a symlink reports its
// changes under share-relative paths (kqueue's fsnotify names events by the link's target).
func TestFolderThroughSymlink(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	check(t, os.Symlink(real, link))
	r := newReader(t, newHub(t, link))
	check(t, os.Mkdir(filepath.Join(real, "d"), 0o755))
	r.wait(wire.EventChanged, "d")
	check(t, os.WriteFile(filepath.Join(real, "d", "f"), nil, 0o644))
	r.wait(wire.EventChanged, "d/f")
}
