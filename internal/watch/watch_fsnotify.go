//go:build !linux || fsnotifytest

package watch

// Outside Linux the tree is watched through github.com/fsnotify/fsnotify: kqueue on macOS and
// the BSDs, ReadDirectoryChangesW on Windows. Built with the fsnotifytest tag it runs on Linux
// too (over inotify), so that this file's logic is tested there; the Linux product uses
// inotify_linux.go. fsnotify watches one directory per Add and offers no recursion, so, as on
// Linux, the hub adds one watch per directory and follows the creation, removal and renaming
// of directories itself. Paths are the key: fsnotify names each event by the path its watch
// was added with, and reports no rename cookie, so a renamed directory is unwatched under its
// old name and walked again under its new one.
//
// kqueue holds an open descriptor for every watched directory and, in fsnotify, for every file
// in it, so each hub spends at most watchBudget descriptors (budget_*.go); on Windows each
// watch holds a handle and a ReadDirectoryChangesW buffer, bounded the same way. A directory
// that would exceed the budget, or whose watch the system refuses (EMFILE), is polled instead:
// listed every PollInterval and compared with its previous listing, so changes below it reach
// peers late but do reach them.

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/peerfs/peerfs/internal/wire"
)

// PollInterval is how often directories past the watch budget are listed again: a change
// there reaches peers within about this long instead of within Window. Listing is cheap per
// directory, but a tree past the budget has thousands of them.
var PollInterval = 5 * time.Second

// watchBudget is the descriptors (kqueue) or watches (elsewhere) one hub may hold; a variable
// so that tests can reach it with a small tree.
var watchBudget = defaultBudget

// watcher is the fsnotify instance and the directories it watches or polls, by share-relative
// path. Events are read after the fact, so, as in inotify_linux.go, the disk as it is now
// wins: a directory is placed only after Lstat shows one there, and an event saying a name was
// created, removed or renamed unwatches whatever was watched there and walks it again.
type watcher struct {
	h      *Hub
	fw     *fsnotify.Watcher
	base   string        // the folder's path with symlinks resolved, as fsnotify names events
	queued chan queued   // fsnotify's events and errors, from pumpLoop; closed when fw is
	asks   chan ask      // Release's requests, served by watchLoop
	ended  chan struct{} // closed by close: no watchLoop will serve a request any more
	gone   chan struct{} // closed when watchLoop returns

	// Owned by the first Subscribe's walk, then by watchLoop.
	dirs   map[string]*watchedDir // "" is the folder itself
	spent  int                    // budget held by the watches in dirs
	gen    uint64                 // walk generation, to sweep directories a rewalk did not find
	closed bool                   // fsnotify said it was closed: walks give up
	warned bool                   // the budget or the system's limit was reported once
	erred  bool                   // an fsnotify error was reported once
}

// ask is a request of Release: drop the watches at path and below, or place them again; done is
// closed once watchLoop has.
type ask struct {
	path    string
	rewatch bool
	done    chan struct{}
}

// queued is one of fsnotify's events, or one of its errors.
type queued struct {
	ev  fsnotify.Event
	err error
}

// maxQueued bounds the events pumpLoop holds for watchLoop (a few MiB at most); past it they
// are dropped for one overflow, which rescans the share, as a kernel queue overflow does.
const maxQueued = 1 << 16

// watchedDir is one directory of the tree, watched by fsnotify or polled.
type watchedDir struct {
	cost   int                    // budget its watch holds; 0 while polled
	listed map[string]entryStamp  // polled: its last listing; nil while watched
	kids   map[string]*watchedDir // subdirectories placed in dirs, by name
	gen    uint64
}

// entryStamp is what a poll compares to tell that an entry changed.
type entryStamp struct {
	mode  fs.FileMode
	size  int64
	mtime int64
}

func newWatcher(h *Hub) (*watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	w := &watcher{h: h, fw: fw, base: h.dir, dirs: make(map[string]*watchedDir), queued: make(chan queued),
		asks: make(chan ask), ended: make(chan struct{}), gone: make(chan struct{})}
	// kqueue's fsnotify resolves a symlink it is asked to watch and names events by the
	// target: the folder's own path may be one (the owner's choice, as on Linux).
	if real, err := filepath.EvalSymlinks(h.dir); err == nil {
		w.base = real
	}
	fi, err := h.root.Lstat(".")
	if err == nil && !fi.IsDir() {
		err = errors.New("not a directory")
	}
	if err == nil {
		err = addWatch(fw, w.base)
	}
	if err != nil {
		fw.Close()
		return nil, err
	}
	w.dirs[""] = &watchedDir{cost: 1, kids: make(map[string]*watchedDir)}
	w.spent = 1
	h.loops.Add(1)
	go w.pumpLoop()
	return w, nil
}

// pumpLoop moves fsnotify's events and errors into a queue of its own, so that fsnotify's
// goroutine never waits for watchLoop. On Windows that goroutine also serves Add, which
// watchLoop and the first walk call: were it blocked handing over an event while they wait
// for its answer, both would wait for good. It ends when fsnotify closes its channels.
func (w *watcher) pumpLoop() {
	defer w.h.loops.Done()
	defer close(w.queued)
	var queue []queued
	overflow := func() { queue = append(queue[:0], queued{err: fsnotify.ErrEventOverflow}) }
	for {
		var out chan<- queued
		var next queued
		if len(queue) > 0 {
			out, next = w.queued, queue[0]
		}
		select {
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			if len(queue) >= maxQueued {
				overflow()
			} else {
				queue = append(queue, queued{ev: ev})
			}
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				overflow() // what was queued is covered by the rescan
			} else {
				queue = append(queue, queued{err: err})
			}
		case out <- next:
			queue = queue[1:]
		}
	}
}

func (w *watcher) close() {
	close(w.ended)
	w.fw.Close()
}

// release has watchLoop drop the watches at path and below (Hub.Release), waiting for it; the
// function it returns has watchLoop place them again if the directory is still there.
func (w *watcher) release(path string) func() {
	w.ask(ask{path: path})
	return func() { w.ask(ask{path: path, rewatch: true}) }
}

// ask hands a request to watchLoop and waits until it was served, or the hub closed.
func (w *watcher) ask(a ask) {
	a.done = make(chan struct{})
	select {
	case w.asks <- a:
		<-a.done
	case <-w.ended:
	case <-w.gone:
	}
}

// abs is the host path of the share-relative path: fsnotify watches by path. A watch is added
// only where Lstat through os.Root showed a directory, not a symlink; should a symlink replace
// it before the watch is added, the watch may see events outside the share, but every event is
// described through os.Root (lookup), which refuses to follow the link out, so nothing of the
// outside reaches a peer.
func (w *watcher) abs(path string) string {
	return filepath.Join(w.base, filepath.FromSlash(path))
}

// rel is the share-relative path of an event's name, or false if it lies outside the folder.
func (w *watcher) rel(name string) (string, bool) {
	r, err := filepath.Rel(w.base, name)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", false
	}
	if r == "." {
		return "", true
	}
	return filepath.ToSlash(r), true
}

// walkAll watches every directory of the tree and sweeps those it no longer finds: the first
// Subscribe's walk, and again after fsnotify's queue overflowed.
func (w *watcher) walkAll() {
	w.gen++
	top := w.dirs[""]
	top.gen = w.gen
	entries, _ := w.list("")
	w.scan("", entries, false)
	var stale []string
	for path, d := range w.dirs {
		if d.gen != w.gen {
			stale = append(stale, path)
		}
	}
	for _, path := range stale {
		w.unwatch(path)
	}
}

// walk places the directory at path (not the folder itself) and everything below it. With
// report, every entry found is noted as changed: those are the files created before the watch
// existed. A path that is not a directory now is left alone.
func (w *watcher) walk(path string, report bool) {
	if w.closed || len(path) > wire.MaxPathLen {
		return
	}
	parent := w.dirs[parentDir(path)]
	if parent == nil {
		return // below a directory that is not placed: its own walk comes first
	}
	fi, err := w.h.root.Lstat(path)
	if err != nil || !fi.IsDir() {
		return // gone again, or a symlink: never watched through
	}
	entries, _ := w.list(path)
	d := w.dirs[path]
	if d == nil {
		d = &watchedDir{kids: make(map[string]*watchedDir)}
		w.dirs[path] = d
		parent.kids[baseName(path)] = d
		w.place(path, d, entries)
		// List again now that the watch exists: an entry made between the first listing
		// (which sized the watch) and the watch would be in neither, and a directory made
		// there would never be watched (TestTreeFollowsChurn under fsnotifytest, one run in
		// a few before).
		entries, _ = w.list(path)
	}
	d.gen = w.gen
	w.scan(path, entries, report)
}

// place adds a watch on the directory at path if the budget allows, and otherwise polls it,
// starting from its listing as it is now.
func (w *watcher) place(path string, d *watchedDir, entries []fs.DirEntry) {
	cost := 1 + entryCost*len(entries)
	if w.spent+cost <= watchBudget {
		err := addWatch(w.fw, w.abs(path))
		if err == nil {
			d.cost = cost
			w.spent += cost
			return
		}
		if errors.Is(err, fsnotify.ErrClosed) {
			w.closed = true
			return
		}
		w.warnLimit(path, err)
	} else {
		w.warnLimit(path, errBudget)
	}
	d.listed = stamps(entries)
}

var errBudget = errors.New("watch budget spent")

func (w *watcher) warnLimit(path string, err error) {
	if !w.warned {
		w.warned = true
		w.h.log.Warn("cannot watch every directory: some are polled instead, and changes there are seen late",
			"dir", path, "poll_interval", PollInterval, "err", err)
	}
}

// scan walks the subdirectories in entries, the listing of the placed directory at path,
// noting every entry with report.
func (w *watcher) scan(path string, entries []fs.DirEntry, report bool) {
	for _, e := range entries {
		p := wire.Join(path, e.Name())
		if len(p) > wire.MaxPathLen {
			continue // beyond what a peer can name
		}
		if report {
			w.h.b.note(p)
		}
		if e.IsDir() {
			w.walk(p, report)
		}
	}
}

// list reads the directory at path through os.Root.
func (w *watcher) list(path string) ([]fs.DirEntry, error) {
	f, err := w.h.root.Open(rootName(path))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// unwatch takes the directory at path and everything below it out of the tree and removes
// their watches. The folder itself stays placed; only what is below it goes.
func (w *watcher) unwatch(path string) {
	d := w.dirs[path]
	if d == nil {
		return
	}
	for name := range d.kids {
		w.unwatch(wire.Join(path, name))
	}
	if path == "" {
		return
	}
	if d.cost > 0 {
		// Already gone with the directory on most systems (ErrNonExistentWatch): nothing to do.
		w.fw.Remove(w.abs(path))
		w.spent -= d.cost
	}
	delete(w.dirs, path)
	if p := w.dirs[parentDir(path)]; p != nil && p.kids[baseName(path)] == d {
		delete(p.kids, baseName(path))
	}
}

// event applies one fsnotify event.
func (w *watcher) event(ev fsnotify.Event) {
	path, ok := w.rel(ev.Name)
	if !ok {
		return
	}
	b := &w.h.b
	if path == "" { // about the folder itself
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			w.h.log.Warn("share folder removed or renamed: no more change events", "dir", w.h.dir)
			b.rescanAll()
			return
		}
		b.note("")
		return
	}
	if len(path) > wire.MaxPathLen {
		return // beyond what a peer can name
	}
	b.note(path)
	if ev.Op&(fsnotify.Create|fsnotify.Remove|fsnotify.Rename) == 0 {
		return
	}
	b.note(parentDir(path)) // the directory's own mtime and size changed with it
	// Whatever was watched at the name is stale (removed, renamed away, or replaced by a
	// rename over it); whatever is there now is walked, its entries reported, since they may
	// have been created before its watch existed.
	w.unwatch(path)
	w.walk(path, true)
}

// poll lists every polled directory and notes what changed since its last listing.
func (w *watcher) poll() {
	var polled []string
	for path, d := range w.dirs {
		if d.listed != nil {
			polled = append(polled, path)
		}
	}
	slices.Sort(polled) // parents before children: a directory gone takes its subtree along
	for _, path := range polled {
		d := w.dirs[path]
		if d == nil || d.listed == nil {
			continue
		}
		entries, err := w.list(path)
		if err != nil {
			if gone(err) {
				w.h.b.note(path)
				w.unwatch(path)
			}
			continue
		}
		now := stamps(entries)
		changed := false
		for name, st := range now {
			if old, ok := d.listed[name]; !ok || old != st {
				changed = true
				w.noteChild(path, name)
				if st.mode.IsDir() && (!ok || !old.mode.IsDir()) {
					w.walk(wire.Join(path, name), true)
				}
			}
		}
		for name := range d.listed {
			if _, ok := now[name]; !ok {
				changed = true
				w.noteChild(path, name)
				w.unwatch(wire.Join(path, name))
			}
		}
		if changed {
			w.h.b.note(path)
		}
		d.listed = now
	}
}

func (w *watcher) noteChild(dir, name string) {
	if p := wire.Join(dir, name); len(p) <= wire.MaxPathLen {
		w.h.b.note(p)
	}
}

// stamps keeps of a listing what a later poll compares.
func stamps(entries []fs.DirEntry) map[string]entryStamp {
	m := make(map[string]entryStamp, len(entries))
	for _, e := range entries {
		st := entryStamp{mode: e.Type()}
		if fi, err := e.Info(); err == nil {
			st = entryStamp{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
		}
		m[e.Name()] = st
	}
	return m
}

// watchLoop reads fsnotify's events into the batch, publishes the batch Window after its
// first change, and lists the polled directories every PollInterval.
func (h *Hub) watchLoop() {
	defer h.loops.Done()
	defer h.endSubs()
	h.log.Debug("watchLoop started", "dir", h.dir)
	defer h.log.Debug("watchLoop stopped", "dir", h.dir)
	w := h.w
	defer close(w.gone)
	window := time.NewTimer(h.Window)
	window.Stop()
	defer window.Stop()
	poll := time.NewTicker(PollInterval)
	defer poll.Stop()
	timing := false
	for {
		select {
		case q, ok := <-w.queued:
			switch {
			case !ok:
				return
			case q.err == nil:
				w.event(q.ev)
			case errors.Is(q.err, fsnotify.ErrEventOverflow):
				// Directories may have come, gone and been replaced unseen: every watch
				// below the folder is placed again.
				h.b.rescanAll()
				w.unwatch("")
				w.walkAll()
			case !w.erred:
				w.erred = true
				h.log.Warn("change events may be missing", "dir", h.dir, "err", q.err)
			}
		case a := <-w.asks:
			if a.rewatch {
				w.walk(a.path, true)
			} else {
				w.unwatch(a.path)
			}
			close(a.done)
		case <-window.C:
			h.flush()
			timing = false
		case <-poll.C:
			w.poll()
		}
		if !timing && !h.b.empty() {
			window.Reset(h.Window)
			timing = true
		}
	}
}

// flush publishes the batch.
func (h *Hub) flush() {
	if events := h.b.take(h.lookup); len(events) > 0 {
		h.publish(events)
	}
}

// baseName returns the last component of the share-relative path.
func baseName(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }

// rootName is path as os.Root names it: "." for the folder itself.
func rootName(path string) string {
	if path == "" {
		return "."
	}
	return path
}
