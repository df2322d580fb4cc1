package share

import (
	"encoding/binary"
	"log/slog"
	"os"
	"sync"

	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/watch"
	"github.com/peerfs/peerfs/internal/wire"
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
// caller closes the subscriber.
func (s *Share) Subscribe() (*watch.Sub, error) { return s.subscribe(nil) }

// subscribe is Subscribe with the logger the hub uses should it be created now.
func (s *Share) subscribe(log *slog.Logger) (*watch.Sub, error) {
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
			mu := lockFor(ino)
			mu.Lock()
			return mu.Unlock
		}
		s.w.hub = hub
	}
	hub := s.w.hub
	s.w.mu.Unlock()
	return hub.Subscribe(), nil // the first one walks the tree: not under mu
}

// eventsFrame is the encoded size at which a batch is cut into another EVENTS frame, as READDIR
// replies are cut at readdirBatch: well under wire.MaxFrameLen, so one event more never
// overflows a frame, and small enough that a frame leaves without holding up other exchanges.
const eventsFrame = 256 << 10

// watch serves WATCH: an empty head reply with more to follow, then one or more EVENTS frames
// per batch of changes, until the peer cancels or the link ends. If the share's watcher stops
// (the share is closed or reopened), the exchange ends with EIO and the peer must watch again;
// if the share is no longer exported to the peer, with ErrnoNoShare.
func (sv *Server) watch(r *rpc.Request, sh *Share) {
	sub, err := sh.subscribe(sv.Logger)
	if err != nil {
		sv.fail(r, err)
		return
	}
	defer sub.Close()
	if err := r.ReplyMore(nil); err != nil {
		return
	}
	ctx := r.Context()
	var scratch []byte
	send := func(body []byte) error { return r.Send(wire.OpEvents, body) }
	for {
		select {
		case <-ctx.Done(): // the peer's CANCEL, or the link ended: the exchange is over
			return
		case batch, ok := <-sub.C():
			if !ok {
				r.Fail(wire.EIO, "change events of share "+sh.Name()+" stopped: watch it again")
				return
			}
			// A subscription outlives the request that opened it: the share must still be
			// exported to this peer, as that share, for each batch it is sent.
			if cur, ok := sv.Lookup(sh.Name()); !ok || cur != sh {
				r.Fail(wire.ErrnoNoShare, "share "+sh.Name()+" is no longer shared with you")
				return
			}
			var err error
			if scratch, err = sendEvents(batch, scratch, send); err != nil {
				return // the link is gone or the exchange was cancelled
			}
		}
	}
}

// sendEvents encodes batch as EVENTS bodies of at most about eventsFrame bytes each, in order,
// and passes each to send. buf is scratch space, returned for reuse; a body is valid only
// during its send.
func sendEvents(batch []wire.Event, buf []byte, send func(body []byte) error) ([]byte, error) {
	// An EVENTS body is a count followed by the events back to back, so events encoded one by
	// one (each as a batch of one, its count cut off) concatenate into a body.
	body := append(buf[:0], 0, 0, 0, 0)
	count := 0
	var one []byte
	for i := range batch {
		one = (&wire.Events{List: batch[i : i+1]}).AppendTo(one[:0])
		if count > 0 && len(body)+len(one)-4 > eventsFrame {
			binary.BigEndian.PutUint32(body, uint32(count))
			if err := send(body); err != nil {
				return body, err
			}
			body, count = body[:4], 0
		}
		body = append(body, one[4:]...)
		count++
	}
	if count == 0 {
		return body, nil
	}
	binary.BigEndian.PutUint32(body, uint32(count))
	return body, send(body)
}
