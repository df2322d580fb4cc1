package rpc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/peerfs/peerfs/internal/chunkbuf"
	"github.com/peerfs/peerfs/internal/wire"
)

// frame is a received frame queued on its exchange; the consumer releases buf.
type frame struct {
	h   wire.Header
	buf *Buffer
}

// queue holds an exchange's incoming frames. push never blocks (readLoop must not). It counts
// each frame as the memory its buffer occupies (Buffer.Cap), not its length: a frame of 65,525
// bytes holds a chunk buffer of 1.125 MiB. The frames are bounded by MaxQueuedFrames, their
// memory by MaxQueuedBytes (frames other than DATA) and dataLimit (DATA, which credit bounds
// in bytes but not in buffers).
type queue struct {
	mu        sync.Mutex
	items     []frame
	head      int
	ctl       int // memory of queued frames other than DATA
	data      int // memory of queued DATA frames
	dataLimit int // most memory of queued DATA: set with the stream's window
	closed    bool
	signal    chan struct{} // capacity 1: "something changed"
}

// dataLimitFor is the memory the DATA of a stream with window bytes of credit may queue: the
// window in full chunks and one partial chunk, each in a chunk buffer.
func dataLimitFor(window int64) int {
	return int(window/wire.MaxChunk+2) * chunkbuf.Len
}

// setDataLimit bounds the memory of queued DATA for a stream of window bytes of credit.
func (q *queue) setDataLimit(window int64) {
	q.mu.Lock()
	q.dataLimit = dataLimitFor(window)
	q.mu.Unlock()
}

// push queues f. It returns false, having released f, when the exchange holds more than its
// limits allow: the peer is flooding it.
func (q *queue) push(f frame) bool {
	n := f.buf.Cap()
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		f.buf.Release()
		return true
	}
	ctl, data := q.ctl, q.data
	if f.h.Op == wire.OpData {
		data += n
	} else {
		ctl += n
	}
	if len(q.items)-q.head >= MaxQueuedFrames || ctl > MaxQueuedBytes || data > q.dataLimit {
		q.mu.Unlock()
		f.buf.Release()
		return false
	}
	q.ctl, q.data = ctl, data
	q.items = append(q.items, f)
	q.mu.Unlock()
	q.wake()
	return true
}

// unqueued takes f's memory out of the queue's counts. Called with q.mu held.
func (q *queue) unqueued(f frame) {
	if f.h.Op == wire.OpData {
		q.data -= f.buf.Cap()
	} else {
		q.ctl -= f.buf.Cap()
	}
}

func (q *queue) wake() {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// pop returns the next frame. Frames queued before a failure are still returned; after them
// pop reports the failure.
func (q *queue) pop(ctx context.Context, x *exchange) (frame, error) {
	for {
		q.mu.Lock()
		if q.head < len(q.items) {
			f := q.items[q.head]
			q.items[q.head] = frame{}
			q.head++
			q.unqueued(f)
			if q.head == len(q.items) {
				q.items, q.head = q.items[:0], 0
			}
			q.mu.Unlock()
			return f, nil
		}
		q.mu.Unlock()
		select {
		case <-q.signal:
		case <-x.failed:
			// drain anything that raced in before reporting
			q.mu.Lock()
			pending := q.head < len(q.items)
			q.mu.Unlock()
			if !pending {
				return frame{}, x.err
			}
		case <-ctx.Done():
			return frame{}, ctx.Err()
		}
	}
}

// close drops queued frames and refuses new ones.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	items := q.items[q.head:]
	q.items, q.head = nil, 0
	for _, f := range items {
		q.unqueued(f)
	}
	q.mu.Unlock()
	for _, f := range items {
		f.buf.Release()
	}
}

// exchange is the state of one tag, on either side.
type exchange struct {
	s      *Session
	tag    uint32
	op     wire.Op
	opener bool
	flags  wire.Flags // on our outgoing frames: FlagResponse unless we opened it

	in            queue
	recvAllowance atomic.Int64 // DATA bytes the peer may still send us
	sendCredit    atomic.Int64 // DATA bytes we may still send
	creditSig     chan struct{}

	failOnce sync.Once
	failed   chan struct{} // closed on cancel or session end
	err      error         // set before failed closes

	ended atomic.Bool // the final frame went out or came in
	// paced: on an exchange we opened, the replies come under the credit we grant
	// (CallPaced), counted in recvAllowance.
	paced atomic.Bool
	// streaming says this side sends DATA on the exchange: counted in Session.streamsOut
	// until the exchange ends.
	streaming atomic.Bool

	// On an exchange the peer opened: the handler pushes a stream or paced replies on it (Push,
	// Request.Pace; CREDIT may come),
	// accepted a stream from the opener (Accept; DATA and one END may come), and the opener's
	// END came. Set once, never cleared: a frame that raced with the exchange's end is dropped
	// by deliver before they are looked at.
	pushed, accepted, inEnded atomic.Bool

	stopOnce sync.Once
	stopped  chan struct{} // closed when the peer sent ERROR: stop sending DATA

	ctx    context.Context // served exchanges: cancelled on fail
	cancel context.CancelFunc
}

func newExchange(s *Session, tag uint32, op wire.Op, opener bool) *exchange {
	x := &exchange{
		s: s, tag: tag, op: op, opener: opener,
		creditSig: make(chan struct{}, 1),
		failed:    make(chan struct{}),
		stopped:   make(chan struct{}),
	}
	x.in.signal = make(chan struct{}, 1)
	if !opener {
		x.flags = wire.FlagResponse
		x.ctx, x.cancel = context.WithCancel(context.Background())
	}
	return x
}

func (x *exchange) addCredit(n int64) {
	x.sendCredit.Add(n)
	select {
	case x.creditSig <- struct{}{}:
	default:
	}
}

// waitCredit takes n bytes of send credit, waiting for the peer to grant them.
func (x *exchange) waitCredit(ctx context.Context, n int64) error {
	for x.sendCredit.Load() < n {
		select {
		case <-x.creditSig:
		case <-x.failed:
			return x.err
		case <-x.stopped:
			return errStopped
		case <-ctx.Done():
			select {
			case <-x.failed: // a served exchange's ctx ends because it failed: say why
				return x.err
			default:
				return ctx.Err()
			}
		}
	}
	x.sendCredit.Add(-n)
	return nil
}

// errStopped: the receiver of our stream answered with ERROR; the ERROR is in the queue.
var errStopped = errors.New("stream stopped by receiver")

// stop records that the peer ended the exchange with ERROR, so a sender waiting for credit
// turns to read it.
func (x *exchange) stop() { x.stopOnce.Do(func() { close(x.stopped) }) }

// fail ends the exchange abnormally (peer cancel or session end) and wakes its waiters.
func (x *exchange) fail(err error) {
	x.failOnce.Do(func() {
		x.err = err
		close(x.failed)
		x.in.wake()
		// Ended before its context is cancelled: a handler that wakes on the cancellation
		// finds the exchange finished and sends nothing after the peer's CANCEL.
		x.end()
		if x.cancel != nil {
			x.cancel()
		}
	})
}

// end marks the exchange finished and frees its tag.
func (x *exchange) end() {
	if x.ended.CompareAndSwap(false, true) {
		if x.streaming.Swap(false) {
			x.s.streamsOut.Add(-1)
		}
		x.s.forget(x)
		if x.cancel != nil {
			x.cancel()
		}
		if !x.opener {
			// No handler reads frames of an ended exchange it serves: give their memory back
			// now (frames its consumer already took are its own).
			x.in.close()
		}
	}
}

func (x *exchange) finished() bool { return x.ended.Load() }

// startStreaming counts the exchange among those this side sends DATA on, until it ends.
func (x *exchange) startStreaming() {
	x.streaming.Store(true)
	x.s.streamsOut.Add(1)
	if x.finished() && x.streaming.Swap(false) {
		x.s.streamsOut.Add(-1) // ended meanwhile, before end could see streaming
	}
}

// send writes a small frame of this exchange.
func (x *exchange) send(op wire.Op, flags wire.Flags, body []byte) error {
	return x.s.sendSmall(op, x.flags|flags, x.tag, body)
}

// sendBuffer writes a frame whose payload is already in buf, and releases buf.
func (x *exchange) sendBuffer(op wire.Op, buf *Buffer) error { return x.sendParts(op, buf, nil) }

// sendParts writes a frame whose payload is head's payload followed by data (which may be
// nil), and releases head.
func (x *exchange) sendParts(op wire.Op, head *Buffer, data []byte) error {
	wire.Header{Len: uint32(len(head.B) - wire.HeaderLen + len(data)), Op: op, Flags: x.flags, Tag: x.tag}.Put(head.B)
	err := x.s.writeParts(head.B, data)
	head.Release()
	return err
}

// abandon is the opener giving up: CANCEL the peer, drop what is queued.
func (x *exchange) abandon() {
	if !x.finished() {
		x.send(wire.OpCancel, 0, nil)
		x.end()
	}
	x.in.close()
}

// errorFrame turns an ERROR frame into the error it carries and releases it.
func errorFrame(f frame) error {
	var m wire.ErrorMsg
	err := m.Decode(f.buf.Payload())
	f.buf.Release()
	if err != nil {
		return &wire.RemoteError{Code: wire.EIO, Message: "malformed ERROR from peer"}
	}
	return &wire.RemoteError{Code: m.Code, Message: m.Message}
}
