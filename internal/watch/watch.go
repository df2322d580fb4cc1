// Package watch turns changes on the owner's disk into coalesced change events for a share: it
// watches the shared folder recursively (inotify on Linux, inotify_linux.go; fsnotify's kqueue
// or ReadDirectoryChangesW elsewhere, watch_fsnotify.go) and hands each subscriber batches of
// wire.Event with share-relative paths. It sits on the owner side below internal/share, which
// forwards the batches to peers as EVENTS frames; it imports nothing of peerfs but wire.
//
// Flow (one goroutine per hub, watchLoop):
//
//  1. read raw events from the kernel (or fsnotify); keep one watch per directory, adding watches for new
//     directories (and listing them, since files can be created before the watch exists) and
//     dropping those of directories that are removed or moved out of the share. Events are
//     read after the fact, so where they and the disk disagree, the disk as it is now wins;
//  2. note each changed path in the current batch (batch.go): once per batch, in order of first
//     occurrence; more than DirLimit children of one directory become one EventRescan of it;
//     a queue overflow in the kernel becomes one EventRescan of the root;
//  3. Window after the batch's first change, Lstat every noted path through an os.Root of the
//     folder (symlinks are never followed out of it) and hand the events to every subscriber
//     without waiting: a subscriber whose queue is full loses its backlog and gets a single
//     EventRescan of the root instead, so a slow peer never holds up the others.
//
// The package must not follow a symlink out of the folder, must not log per event, and must
// never block on a subscriber.
package watch

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/peerfs/peerfs/internal/wire"
)

// Tuning defaults; a Hub's fields may override them before its first Subscribe.
const (
	// DefaultWindow is how long a batch gathers changes after its first one: long enough that a
	// burst (an untar, a build, a save that writes a temporary file and renames it) leaves as a
	// few batches, short enough that a mount learns of a change well within a human's notice.
	DefaultWindow = 20 * time.Millisecond
	// DefaultDirLimit is how many changed children of one directory a batch lists one by one;
	// past it the directory becomes one EventRescan (Syncthing's watchaggregator does the same
	// with its maxFilesPerDir), which costs a subscriber one READDIR instead of that many events.
	DefaultDirLimit = 256
	// DefaultQueueLen is how many batches a subscriber may leave unread before its backlog is
	// replaced by one EventRescan of the root. At the default window that is over a second of
	// continuous changes.
	DefaultQueueLen = 64
	// MaxBatch bounds the paths one batch tracks, and with it the memory of a burst across many
	// directories: past it the batch becomes one EventRescan of the root.
	MaxBatch = 4096
)

// Hub watches one folder and fans its change events out to subscribers. Create it with New;
// it starts watching the whole tree on the first Subscribe and stops on Close.
type Hub struct {
	// Window, DirLimit and QueueLen tune batching (see the Default constants). Set them before
	// the first Subscribe, from the goroutine that calls it; zero means the default.
	Window   time.Duration
	DirLimit int
	QueueLen int
	// Settle, when set, is called with a regular file's inode number before the file is
	// described, and the function it returns after: it waits out a write to the file under
	// way, so that an event reports a state a writer left the file in (one its writer was
	// told of) rather than one caught halfway, with the time of a write that has not yet
	// grown the file. Set it before the first Subscribe.
	Settle func(ino uint64) (release func())

	dir  string   // absolute path of the folder, for the fallback watch path only
	root *os.Root // every Lstat and directory listing goes through it
	log  *slog.Logger
	w    *watcher // the platform's notification source; owned by watchLoop once started
	b    batch    // the batch being gathered; owned by watchLoop

	startOnce sync.Once
	loops     sync.WaitGroup
	closeOnce sync.Once

	subs struct {
		mu     sync.Mutex
		set    map[*Sub]struct{}
		closed bool // Close ran or watchLoop ended: no more batches
	}
}

// New opens dir for watching and places a watch on it; the rest of the tree is watched from the
// first Subscribe on. A nil log discards.
func New(dir string, log *slog.Logger) (*Hub, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", dir, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", abs, err)
	}
	h := &Hub{dir: abs, root: root, log: log}
	h.subs.set = make(map[*Sub]struct{})
	if h.w, err = newWatcher(h); err != nil {
		root.Close()
		return nil, fmt.Errorf("watching %s: %w", abs, err)
	}
	return h, nil
}

// Subscribe returns a new subscriber. The first call walks the tree and places a watch on
// every directory before it returns, so any change made after Subscribe returns is reported.
// After Close it returns a subscriber whose channel is already closed.
func (h *Hub) Subscribe() *Sub {
	h.startOnce.Do(h.start)
	s := &Sub{h: h, c: make(chan []wire.Event, h.QueueLen)}
	h.subs.mu.Lock()
	defer h.subs.mu.Unlock()
	if h.subs.closed {
		close(s.c)
		return s
	}
	h.subs.set[s] = struct{}{}
	return s
}

// start runs once, on the first Subscribe: it settles the tuning, walks the tree and starts
// watchLoop unless the hub was closed meanwhile.
func (h *Hub) start() {
	if h.Window <= 0 {
		h.Window = DefaultWindow
	}
	if h.DirLimit <= 0 {
		h.DirLimit = DefaultDirLimit
	}
	if h.QueueLen <= 0 {
		h.QueueLen = DefaultQueueLen
	}
	h.b.init(h.DirLimit, MaxBatch)
	h.subs.mu.Lock()
	closed := h.subs.closed
	h.subs.mu.Unlock()
	if closed {
		return
	}
	h.w.walkAll()
	h.loops.Add(1)
	go h.watchLoop()
}

// Release drops the watches on the directory at path (share-relative) and everything below
// it, for a caller about to remove it, and returns the function that places them again where
// the directory is still there (the removal failed), which the caller must call. On Windows
// a watch holds an open handle, and a directory with one stays pending deletion, its name
// still taken, until the handle closes, on file systems without POSIX delete semantics (FAT,
// exFAT, network shares, Wine). Where watches hold no handle (inotify) it does nothing.
func (h *Hub) Release(path string) (rewatch func()) { return h.w.release(path) }

// Close stops watching, closes every subscriber's channel and waits for watchLoop. It is safe
// to call more than once.
func (h *Hub) Close() {
	h.closeOnce.Do(func() {
		h.endSubs()
		h.w.close()               // wakes watchLoop's read; makes a running first walk give up
		h.startOnce.Do(func() {}) // waits for a first Subscribe's walk, or prevents it
		h.loops.Wait()
		h.root.Close()
	})
}

// endSubs closes every subscriber's channel and refuses new ones.
func (h *Hub) endSubs() {
	h.subs.mu.Lock()
	defer h.subs.mu.Unlock()
	h.subs.closed = true
	for s := range h.subs.set {
		close(s.c)
	}
	clear(h.subs.set)
}

// publish hands a batch to every subscriber without blocking.
func (h *Hub) publish(events []wire.Event) {
	h.subs.mu.Lock()
	defer h.subs.mu.Unlock()
	for s := range h.subs.set {
		s.offer(events)
	}
}

// Sub is one subscriber's queue of batches.
type Sub struct {
	h *Hub
	c chan []wire.Event // closed by Sub.Close or Hub.Close, under h.subs.mu
}

// C returns the subscriber's batches. Each batch lists every changed path once, in the order of
// their first change; it is shared with other subscribers and must not be modified. The
// channel is closed when the subscriber or the hub is closed, or when watching fails.
func (s *Sub) C() <-chan []wire.Event { return s.c }

// Close unsubscribes and closes C. It is safe to call more than once.
func (s *Sub) Close() {
	s.h.subs.mu.Lock()
	defer s.h.subs.mu.Unlock()
	if _, ok := s.h.subs.set[s]; ok {
		delete(s.h.subs.set, s)
		close(s.c)
	}
}

// offer queues a batch; if the queue is full, the subscriber has fallen behind: its backlog is
// dropped and replaced by one rescan of the root, which covers the dropped batches and this
// one. Called with h.subs.mu held, so no Close races the sends.
func (s *Sub) offer(events []wire.Event) {
	select {
	case s.c <- events:
		return
	default:
	}
	for drained := false; !drained; {
		select {
		case <-s.c:
		default:
			drained = true
		}
	}
	select {
	case s.c <- []wire.Event{{Kind: wire.EventRescan}}:
	default: // unreachable: only publish sends, and the queue was just emptied
	}
}
