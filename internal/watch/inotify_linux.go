//go:build !fsnotifytest

package watch

// inotify is used through golang.org/x/sys/unix rather than fsnotify: recursion needs our own
// directory tree keyed by watch descriptor anyway (fsnotify v1 watches one directory per call
// and keeps a second, path-keyed map), and coalescing needs what fsnotify hides or moves out of
// band: IN_ISDIR on each event, the rename cookie that pairs MOVED_FROM with MOVED_TO (so a
// renamed directory keeps its watches), IN_IGNORED (when a watch is gone), and IN_Q_OVERFLOW in
// its place in the event stream rather than on a separate error channel. x/sys is already in
// the module graph.

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peerfs/peerfs/internal/wire"
)

// watchMask is what each directory's watch reports. IN_CLOSE_WRITE is left out: every write
// already reports IN_MODIFY, and the last one's comes after the final size. IN_EXCL_UNLINK
// keeps a file that is unlinked but still open from reporting its writes under a dead name.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// readBuf is the size of one read of the event queue: about a thousand events with short
// names. It must hold at least one event with a name of NAME_MAX bytes.
const readBuf = 64 << 10

// watcher is the inotify instance and the tree of watched directories.
//
// Events are read some time after they happened, so the tree follows one rule: the disk as it
// is now wins over the event being applied. A directory is placed at a name only after Lstat
// and add_watch show which inode is there now (inotify gives the same descriptor for the same
// inode, which is how a renamed directory's node is found again), and an event saying that a
// directory left a name takes the node out only if Lstat shows another inode, or none, there
// now. Nodes taken out wait as loose until the batch is published: by then a later event has
// placed them elsewhere, or they left the share and their watches are removed.
type watcher struct {
	h  *Hub
	f  *os.File        // the inotify descriptor, non-blocking, so Close wakes a Read
	rc syscall.RawConn // f's, for add and rm without racing Close

	// Owned by the first Subscribe's walk, then by watchLoop.
	top    *dirNode
	dirs   map[int]*dirNode  // by watch descriptor
	loose  map[*dirNode]bool // taken out of the tree in this batch, watch still in place
	gen    uint64            // walk generation, to sweep directories a rewalk did not find
	procFD bool              // /proc/self/fd is there: watches are placed on opened directories
	warned bool              // the watch limit was reported once
}

// dirNode is one watched directory. Its path is not stored: it follows from the names up to
// the top, so renaming a directory costs one update whatever lies below it.
type dirNode struct {
	wd       int
	dev, ino uint64 // the inode the watch is on
	name     string
	parent   *dirNode // nil for the top and for a directory out of the tree
	kids     map[string]*dirNode
	gen      uint64
}

func newWatcher(h *Hub) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("inotify_init1", err)
	}
	w := &watcher{h: h, f: os.NewFile(uintptr(fd), "inotify"),
		dirs: make(map[int]*dirNode), loose: make(map[*dirNode]bool)}
	if w.rc, err = w.f.SyscallConn(); err != nil {
		w.f.Close()
		return nil, err
	}
	_, err = os.Stat("/proc/self/fd")
	w.procFD = err == nil
	d, err := h.root.OpenFile(".", os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		w.f.Close()
		return nil, err
	}
	defer d.Close()
	wd, err := w.addWatch(d, "")
	if err != nil {
		w.f.Close()
		return nil, err
	}
	w.top = &dirNode{wd: wd, kids: make(map[string]*dirNode)}
	if fi, err := d.Stat(); err == nil {
		w.top.dev, w.top.ino = fileID(fi)
	}
	w.dirs[wd] = w.top
	return w, nil
}

func (w *watcher) close() { w.f.Close() }

// release: an inotify watch does not keep a directory from being removed.
func (w *watcher) release(string) func() { return func() {} }

// addWatch places a watch on the opened directory d (at share-relative path). Through
// /proc/self/fd the watch lands on exactly the directory os.Root opened, so it can never be
// placed outside the share; without /proc it falls back to the absolute path, not following a
// final symlink.
func (w *watcher) addWatch(d *os.File, path string) (int, error) {
	name, mask := filepath.Join(w.h.dir, filepath.FromSlash(path)), uint32(watchMask|unix.IN_DONT_FOLLOW)
	if path == "" {
		mask = watchMask // the folder itself may be reached through a symlink the owner chose
	}
	dc, err := d.SyscallConn()
	if err != nil {
		return 0, err
	}
	wd := -1
	cerr := dc.Control(func(dfd uintptr) {
		if w.procFD {
			name, mask = "/proc/self/fd/"+strconv.Itoa(int(dfd)), watchMask
		}
		err = w.rc.Control(func(ifd uintptr) {
			wd, err = unix.InotifyAddWatch(int(ifd), name, mask)
		})
	})
	if cerr != nil {
		return 0, cerr
	}
	if err != nil {
		return 0, os.NewSyscallError("inotify_add_watch", err)
	}
	return wd, nil
}

func (w *watcher) rmWatch(wd int) {
	w.rc.Control(func(ifd uintptr) { unix.InotifyRmWatch(int(ifd), uint32(wd)) })
}

// path returns the share-relative path of n, or false if n is no longer in the tree.
func (w *watcher) path(n *dirNode) (string, bool) {
	var names []string
	for ; n != w.top; n = n.parent {
		if n == nil {
			return "", false
		}
		names = append(names, n.name)
	}
	switch len(names) {
	case 0:
		return "", true
	case 1:
		return names[0], true
	}
	b := make([]byte, 0, 64)
	for i := len(names) - 1; i >= 0; i-- {
		b = append(b, names[i]...)
		if i > 0 {
			b = append(b, '/')
		}
	}
	return string(b), true
}

// walkAll places watches on every directory of the tree and sweeps nodes it no longer finds:
// the first Subscribe's walk, and again after the kernel's queue overflowed and directories may
// have come and gone unseen.
func (w *watcher) walkAll() {
	w.gen++
	w.top.gen = w.gen
	if d, err := w.h.root.OpenFile(".", os.O_RDONLY|syscall.O_DIRECTORY, 0); err == nil {
		w.scan(w.top, "", d, false)
	}
	for wd, n := range w.dirs {
		if n.gen != w.gen {
			w.drop(n)
			delete(w.dirs, wd)
		}
	}
	w.dropLoose()
}

// walk watches the directory name inside parent and everything below it. With report, every
// entry found is noted as changed: those are the files created before the watch existed.
func (w *watcher) walk(parent *dirNode, name string, report bool) {
	pp, ok := w.path(parent)
	if !ok {
		return
	}
	path := wire.Join(pp, name)
	if len(path) > wire.MaxPathLen {
		return // beyond what a peer can name
	}
	fi, err := w.h.root.Lstat(path)
	if err != nil || !fi.IsDir() {
		return // gone again, or a symlink: never watched through
	}
	d, err := w.h.root.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return
	}
	if dfi, err := d.Stat(); err != nil || !os.SameFile(fi, dfi) {
		d.Close() // replaced between Lstat and open
		return
	}
	wd, err := w.addWatch(d, path)
	if err != nil {
		d.Close()
		if errors.Is(err, syscall.ENOSPC) && !w.warned {
			w.warned = true
			w.h.log.Warn("inotify watch limit reached: changes below some directories will not be reported; raise fs.inotify.max_user_watches",
				"dir", path, "err", err)
		}
		return
	}
	n := w.dirs[wd]
	if n == nil {
		n = &dirNode{wd: wd, kids: make(map[string]*dirNode)}
		w.dirs[wd] = n
	}
	n.dev, n.ino = fileID(fi)
	for p := parent; p != nil; p = p.parent {
		if p == n {
			d.Close() // a directory reachable inside itself (a bind mount): watched once
			return
		}
	}
	w.attach(parent, name, n)
	n.gen = w.gen
	w.scan(n, path, d, report)
}

// scan lists the opened directory d (node n at path), closes it, and walks its subdirectories.
func (w *watcher) scan(n *dirNode, path string, d *os.File, report bool) {
	entries, _ := d.ReadDir(-1)
	d.Close()
	for _, e := range entries {
		if report {
			if p := wire.Join(path, e.Name()); len(p) <= wire.MaxPathLen {
				w.h.b.note(p)
			}
		}
		if e.IsDir() {
			w.walk(n, e.Name(), report)
		}
	}
}

// attach places n at name inside parent, taking it from where it was. A different node at that
// name is a directory that is no longer there: it goes loose.
func (w *watcher) attach(parent *dirNode, name string, n *dirNode) {
	w.detach(n)
	delete(w.loose, n)
	if old := parent.kids[name]; old != nil && old != n {
		w.detach(old)
		w.loose[old] = true
	}
	n.parent, n.name = parent, name
	parent.kids[name] = n
}

// detach takes n out of the tree; its watch stays until IN_IGNORED or drop.
func (w *watcher) detach(n *dirNode) {
	if p := n.parent; p != nil && p.kids[n.name] == n {
		delete(p.kids, n.name)
	}
	n.parent = nil
}

// left handles an event saying the directory at name inside parent (path) went away: its node
// goes loose unless the disk shows it still there (the event is older than a later placement).
func (w *watcher) left(parent *dirNode, name, path string) {
	k := parent.kids[name]
	if k == nil {
		return
	}
	if fi, err := w.h.root.Lstat(path); err == nil && fi.IsDir() {
		if dev, ino := fileID(fi); dev == k.dev && ino == k.ino {
			return
		}
	}
	w.detach(k)
	w.loose[k] = true
}

// dropLoose removes the watches of directories that left the tree in this batch and were not
// placed again: they left the share, or their move was not seen.
func (w *watcher) dropLoose() {
	for n := range w.loose {
		if n.parent == nil && n != w.top && w.dirs[n.wd] == n {
			w.dropTree(n)
		}
	}
	clear(w.loose)
}

// drop removes n's watch and takes it out of the tree (not out of dirs: the caller does).
func (w *watcher) drop(n *dirNode) {
	w.detach(n)
	w.rmWatch(n.wd)
}

// dropTree removes the watches of n and everything below it: a directory moved out of the share.
func (w *watcher) dropTree(n *dirNode) {
	for _, k := range n.kids {
		k.parent = nil
		w.dropTree(k)
	}
	clear(n.kids)
	if w.dirs[n.wd] == n {
		delete(w.dirs, n.wd)
	}
	w.rmWatch(n.wd)
}

// watchLoop reads the kernel's events into the batch and publishes the batch Window after its
// first change, using the read deadline as the timer.
func (h *Hub) watchLoop() {
	defer h.loops.Done()
	defer h.endSubs()
	h.log.Debug("watchLoop started", "dir", h.dir)
	defer h.log.Debug("watchLoop stopped", "dir", h.dir)
	w := h.w
	buf := make([]byte, readBuf)
	timing := false
	for {
		n, err := w.f.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			h.flush()
			w.f.SetReadDeadline(time.Time{})
			timing = false
			continue
		}
		if errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil {
			h.log.Warn("change events stopped: reading inotify failed", "dir", h.dir, "err", err)
			return
		}
		w.handle(buf[:n])
		if !timing && !h.b.empty() {
			w.f.SetReadDeadline(time.Now().Add(h.Window))
			timing = true
		}
	}
}

// flush publishes the batch. Directories that left the tree and were not placed again by now
// left the share: their watches go.
func (h *Hub) flush() {
	h.w.dropLoose()
	if events := h.b.take(h.lookup); len(events) > 0 {
		h.publish(events)
	}
}

// handle applies one read's worth of raw events.
func (w *watcher) handle(buf []byte) {
	for len(buf) >= unix.SizeofInotifyEvent {
		wd := int(int32(binary.NativeEndian.Uint32(buf[0:])))
		mask := binary.NativeEndian.Uint32(buf[4:])
		nameLen := int(binary.NativeEndian.Uint32(buf[12:]))
		if unix.SizeofInotifyEvent+nameLen > len(buf) {
			return // the kernel never splits an event; nothing sane follows
		}
		name := buf[unix.SizeofInotifyEvent : unix.SizeofInotifyEvent+nameLen]
		for len(name) > 0 && name[len(name)-1] == 0 {
			name = name[:len(name)-1]
		}
		buf = buf[unix.SizeofInotifyEvent+nameLen:]
		w.event(wd, mask, string(name))
	}
}

// event applies one raw event.
func (w *watcher) event(wd int, mask uint32, name string) {
	b := &w.h.b
	if mask&unix.IN_Q_OVERFLOW != 0 {
		b.rescanAll()
		w.walkAll()
		return
	}
	n := w.dirs[wd]
	if mask&unix.IN_IGNORED != 0 { // the watch is gone: directory removed, or we removed it
		if n == nil {
			return
		}
		delete(w.dirs, wd)
		delete(w.loose, n)
		w.detach(n)
		if n == w.top {
			w.h.log.Warn("share folder removed or unmounted: no more change events", "dir", w.h.dir)
			b.rescanAll()
		}
		return
	}
	if n == nil { // a watch no longer tracked: a directory that left the share
		w.rmWatch(wd)
		return
	}
	dir, ok := w.path(n)
	if !ok {
		return // below a directory out of the tree until a later event places it again
	}
	if name == "" { // about the watched directory itself; its parent reports it too
		if n == w.top && mask&(unix.IN_ATTRIB|unix.IN_MODIFY) != 0 {
			b.note("")
		}
		return
	}
	path := wire.Join(dir, name)
	if len(path) > wire.MaxPathLen {
		return // beyond what a peer can name
	}
	b.note(path)
	if mask&(unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0 {
		b.note(dir) // the directory's own mtime and size changed with it
	}
	if mask&unix.IN_ISDIR == 0 {
		return
	}
	switch {
	case mask&unix.IN_CREATE != 0:
		w.walk(n, name, true)
	case mask&unix.IN_MOVED_TO != 0:
		// Walked again even when it is a directory renamed within the share, whose node and
		// watches walk finds again by descriptor: a subdirectory created while an event for it
		// named the old, stale path was not found then, and is found now. Contents are not
		// listed one by one: the directory as a whole is news to a subscriber.
		w.walk(n, name, false)
	case mask&(unix.IN_MOVED_FROM|unix.IN_DELETE) != 0:
		w.left(n, name, path)
	}
}

// fileID returns the device and inode numbers of what Lstat returned.
func fileID(fi fs.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Dev, st.Ino
	}
	return 0, 0
}
