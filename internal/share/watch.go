package share

import (
	"log/slog"
	"os"
	"sync"

	"github.com/peerfs/peerfs/internal/watch"
)

// watchState holds the share's change watcher: one watch.Hub per share, whatever the number of
// peers watching, created by the first subscription and closed with the share. Every WATCH
// exchange, on any link, is one subscriber of it. Changes the share makes itself (peers'
// uploads and edits) are reported like any other: other peers' mounts learn of them that way.
type watchState struct {
	mu     sync.Mutex
	hub    *watch.Hub // nil until the first subscription; guarded by mu
	closed bool       // the share is closed: no new hub; guarded by mu
}

// close ends every subscription of the share.
func (w *watchState) close() {
	w.mu.Lock()
	hub := w.hub
	w.hub, w.closed = nil, true
	w.mu.Unlock()
	if hub != nil {
		hub.Close()
	}
}

// release drops the watcher's hold on the directory at path and below while it is removed
// (watch.Hub.Release); the returned function, which the caller must call once the removal is
// done, watches what is still there again. Without a watcher it does nothing.
func (w *watchState) release(path string) (rewatch func()) {
	w.mu.Lock()
	hub := w.hub
	w.mu.Unlock()
	if hub == nil {
		return func() {}
	}
	return hub.Release(path)
}

// Subscribe returns a subscriber to the share's changes, as batches of events with
// share-relative paths whose entries are what Stat would return. The first subscription walks
// the folder to watch every directory (on a large tree this takes a while); any change made
// after Subscribe returns is reported. The subscriber's channel closes with the share. The
// caller closes the subscriber. log (nil: slog.Default) is the watcher's, should this call
// create it.
func (s *Share) Subscribe(log *slog.Logger) (*watch.Sub, error) {
	const op = "watch"
	s.w.mu.Lock()
	if s.w.closed {
		s.w.mu.Unlock()
		return nil, fail(op, "", os.ErrClosed)
	}
	if s.w.hub == nil {
		if log == nil {
			log = slog.Default()
		}
		// The hub opens its own os.Root on the folder: it resolves every path through it, as
		// the share does.
		hub, err := watch.New(s.dir, log.With("share", s.name))
		if err != nil {
			s.w.mu.Unlock()
			return nil, fail(op, "", err)
		}
		// An event describes a file as a WRITE or SETATTR left it, never in between: a
		// mount tells its own writes' echoes by the exact state their replies gave.
		hub.Settle = func(ino uint64) func() {
			mu := s.writeLock(ino)
			mu.Lock()
			return mu.Unlock
		}
		s.w.hub = hub
	}
	hub := s.w.hub
	s.w.mu.Unlock()
	return hub.Subscribe(), nil // the first one walks the tree: not under mu
}
