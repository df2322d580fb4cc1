package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/peerfs/peerfs/internal/wire"
)

// Call sends a request and waits for its single reply frame. The reply is returned in a pooled
// Buffer that the caller must Release. An ERROR reply comes back as *wire.RemoteError.
func (s *Session) Call(ctx context.Context, op wire.Op, body []byte) (*Buffer, error) {
	x, err := s.request(ctx, op, body)
	if err != nil {
		return nil, err
	}
	return x.oneReply(ctx, op)
}

// CallBuffer is Call with the request body in body's payload (a pooled Buffer from
// GetBuffer) followed by data, which may be nil: a bulk request such as a 1 MiB WRITE leaves
// without its data being copied. CallBuffer takes ownership of body and releases it; data is
// not touched once it returns.
func (s *Session) CallBuffer(ctx context.Context, op wire.Op, body *Buffer, data []byte) (*Buffer, error) {
	if n := len(body.B) - wire.HeaderLen + len(data); n > wire.MaxFrameLen {
		body.Release()
		return nil, fmt.Errorf("%v request of %d bytes exceeds the frame limit", op, n)
	}
	x, err := s.open(ctx, op)
	if err != nil {
		body.Release()
		return nil, err
	}
	if err := x.sendParts(op, body, data); err != nil {
		x.end()
		return nil, err
	}
	return x.oneReply(ctx, op)
}

// oneReply waits for the one reply frame of the request op just sent on x and ends the
// exchange; a reply announcing more frames is a protocol error. The caller releases the
// Buffer returned.
func (x *exchange) oneReply(ctx context.Context, op wire.Op) (*Buffer, error) {
	defer x.in.close()
	f, err := x.reply(ctx)
	if err != nil {
		return nil, err
	}
	if f.h.Flags&wire.FlagMore != 0 {
		f.buf.Release()
		x.abandon()
		return nil, fmt.Errorf("%w: %v reply has more frames than expected", ErrProtocol, op)
	}
	x.end()
	return f.buf, nil
}

// CallMore sends a request whose reply may span several frames and calls fn with each frame's
// payload, which is valid only during the call.
func (s *Session) CallMore(ctx context.Context, op wire.Op, body []byte, fn func(payload []byte) error) error {
	return s.callMore(ctx, op, body, 0, fn)
}

// CallPaced is CallMore for a request whose reply frames flow under credit (LIST): body
// announces window bytes of reply payload to the peer, and the payload fn consumed is granted
// back a quarter window at a time, so a reply of any length never queues more than window
// bytes here. window must be at least wire.MinWindow.
func (s *Session) CallPaced(ctx context.Context, op wire.Op, body []byte, window uint32, fn func(payload []byte) error) error {
	if window < wire.MinWindow {
		return fmt.Errorf("reply window %d is below wire.MinWindow", window)
	}
	return s.callMore(ctx, op, body, window, fn)
}

// callMore runs CallMore, granting credit for the replies when window is not 0.
func (s *Session) callMore(ctx context.Context, op wire.Op, body []byte, window uint32, fn func(payload []byte) error) error {
	if len(body) > wire.MaxFrameLen {
		return fmt.Errorf("%v request of %d bytes exceeds the frame limit", op, len(body))
	}
	x, err := s.open(ctx, op)
	if err != nil {
		return err
	}
	if window > 0 {
		x.recvAllowance.Store(int64(window))
		x.paced.Store(true)
	}
	if err := x.send(op, 0, body); err != nil {
		x.end()
		return err
	}
	defer x.in.close()
	var pending int64 // reply payload consumed and not yet granted back
	for {
		f, err := x.reply(ctx)
		if err != nil {
			return err
		}
		more := f.h.Flags&wire.FlagMore != 0
		n := int64(len(f.buf.Payload()))
		err = fn(f.buf.Payload())
		f.buf.Release()
		if err != nil {
			x.abandon()
			return err
		}
		if !more {
			x.end()
			return nil
		}
		if window > 0 {
			if pending += n; pending >= int64(window)/4 {
				x.recvAllowance.Add(pending) // before the peer can use it
				c := wire.Credit{Bytes: uint32(pending)}
				pending = 0
				var b [wire.CreditLen]byte
				if err := x.send(wire.OpCredit, 0, c.AppendTo(b[:0])); err != nil {
					x.abandon()
					return err
				}
			}
		}
	}
}

// request opens an exchange and sends the request frame.
func (s *Session) request(ctx context.Context, op wire.Op, body []byte) (*exchange, error) {
	if len(body) > wire.MaxFrameLen {
		return nil, fmt.Errorf("%v request of %d bytes exceeds the frame limit", op, len(body))
	}
	x, err := s.open(ctx, op)
	if err != nil {
		return nil, err
	}
	if err := x.send(op, 0, body); err != nil {
		x.end()
		return nil, err
	}
	return x, nil
}

// reply waits for the next response frame that is not DATA/END: the reply of op or an ERROR.
// On cancellation it abandons the exchange.
func (x *exchange) reply(ctx context.Context) (frame, error) {
	f, err := x.in.pop(ctx, x)
	if err != nil {
		x.abandon()
		return frame{}, err
	}
	switch f.h.Op {
	case x.op:
		return f, nil
	case wire.OpError:
		x.end()
		return frame{}, errorFrame(f)
	}
	f.buf.Release()
	x.abandon()
	x.s.violation("unexpected %v in reply to %v", f.h.Op, x.op)
	return frame{}, fmt.Errorf("%w: unexpected %v in reply to %v", ErrProtocol, f.h.Op, x.op)
}

// OpenInStream sends a request that the peer answers with a head frame (the reply of op), then a
// stream of DATA frames ended by END. window is the initial credit, and must equal the window
// the request body announces to the peer. The head Buffer must be released by the caller.
func (s *Session) OpenInStream(ctx context.Context, op wire.Op, body []byte, window uint32) (*Buffer, *InStream, error) {
	if window < wire.MinWindow {
		return nil, nil, fmt.Errorf("stream window %d is below wire.MinWindow", window)
	}
	x, err := s.open(ctx, op)
	if err != nil {
		return nil, nil, err
	}
	x.recvAllowance.Store(int64(window))
	x.in.setDataLimit(int64(window))
	if err := x.send(op, 0, body); err != nil {
		x.end()
		return nil, nil, err
	}
	f, err := x.reply(ctx)
	if err != nil {
		x.in.close()
		return nil, nil, err
	}
	return f.buf, &InStream{x: x, window: int64(window)}, nil
}

// OpenOutStream sends a request that the peer answers with a head frame (the reply of op) and
// credit; the caller then sends DATA with Send, ends with End and collects the peer's verdict
// with Finish. The head Buffer must be released by the caller.
func (s *Session) OpenOutStream(ctx context.Context, op wire.Op, body []byte) (*Buffer, *OutStream, error) {
	x, err := s.request(ctx, op, body)
	if err != nil {
		return nil, nil, err
	}
	x.startStreaming()
	f, err := x.reply(ctx)
	if err != nil {
		x.in.close()
		return nil, nil, err
	}
	return f.buf, &OutStream{x: x, ctx: ctx}, nil
}

// InStream receives a stream's DATA frames in order and grants credit as they are consumed.
// One goroutine calls Next, End and Close; one goroutine (the same or another) calls Consumed.
type InStream struct {
	x       *exchange
	window  int64
	pending int64       // consumed bytes not yet granted back; touched only by Consumed
	end     *Buffer     // END payload once seen
	done    atomic.Bool // END or ERROR seen; Consumed may run on another goroutine than Next
}

// Next returns the next chunk: its buffer (release it with Consumed), its file offset and its
// bytes. At the end of the stream it returns io.EOF; End then holds the END payload.
func (in *InStream) Next(ctx context.Context) (*Buffer, uint64, []byte, error) {
	if in.done.Load() {
		return nil, 0, nil, io.EOF
	}
	f, err := in.x.in.pop(ctx, in.x)
	if err != nil {
		return nil, 0, nil, err
	}
	switch f.h.Op {
	case wire.OpData:
		off, data, _ := wire.DataOffset(f.buf.Payload()) // length checked by deliver
		return f.buf, off, data, nil
	case wire.OpEnd:
		in.end = f.buf
		in.done.Store(true)
		if in.x.opener {
			in.x.end()
		}
		return nil, 0, nil, io.EOF
	case wire.OpError:
		in.done.Store(true)
		in.x.end()
		return nil, 0, nil, errorFrame(f)
	}
	f.buf.Release()
	in.x.s.violation("unexpected %v in stream %v", f.h.Op, in.x.op)
	return nil, 0, nil, fmt.Errorf("%w: unexpected %v in stream", ErrProtocol, f.h.Op)
}

// Consumed releases a chunk returned by Next and grants its bytes back to the sender, in
// batches of a quarter window so credit costs few frames.
func (in *InStream) Consumed(buf *Buffer, n int) error {
	buf.Release()
	in.pending += int64(n)
	if in.pending < in.window/4 || in.done.Load() {
		return nil
	}
	grant := in.pending
	in.pending = 0
	in.x.recvAllowance.Add(grant) // before the peer can use it
	c := wire.Credit{Bytes: uint32(grant)}
	var b [wire.CreditLen]byte
	return in.x.send(wire.OpCredit, 0, c.AppendTo(b[:0]))
}

// End returns the END payload after Next returned io.EOF; valid until Close.
func (in *InStream) End() []byte {
	if in.end == nil {
		return nil
	}
	return in.end.Payload()
}

// Close ends the stream: a stream not read to its end is cancelled.
func (in *InStream) Close() {
	if !in.done.Load() && in.x.opener {
		in.x.abandon()
	} else {
		in.x.in.close()
	}
	in.end.Release()
	in.end = nil
}

// OutStream sends a stream's DATA frames within the credit the receiver grants.
type OutStream struct {
	x      *exchange
	ctx    context.Context
	budget *chunkBudget // streams pushed for the peer: their read-ahead (GetChunk)
}

// GetChunk returns a buffer for a DATA frame of n data bytes, as GetBuffer(
// wire.DataHeaderLen+n). On a stream pushed for the peer it waits while the stream already
// holds a chunk and the link's read-ahead budget (PushReadAhead) is spent; the chunk counts
// until it is released (by Send). It fails when the stream ends.
func (o *OutStream) GetChunk(n int) (*Buffer, error) {
	if o.budget != nil {
		if err := o.budget.take(o.ctx); err != nil {
			return nil, err
		}
	}
	b := GetBuffer(wire.DataHeaderLen + n)
	b.budget = o.budget
	return b, nil
}

// chunkBudget is the read-ahead of one pushed stream: one chunk of its own, more with tokens
// from the link's PushReadAhead.
type chunkBudget struct {
	s     *Session
	mu    sync.Mutex
	own   bool          // the stream's own chunk is taken
	extra int           // tokens of s.readAhead taken
	freed chan struct{} // capacity 1: a chunk came back
}

func (c *chunkBudget) take(ctx context.Context) error {
	for {
		c.mu.Lock()
		if !c.own {
			c.own = true
			c.mu.Unlock()
			return nil
		}
		select {
		case c.s.readAhead <- struct{}{}:
			c.extra++
			c.mu.Unlock()
			return nil
		default:
		}
		c.mu.Unlock()
		select {
		case <-c.freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *chunkBudget) put() {
	c.mu.Lock()
	if c.extra > 0 {
		c.extra--
		<-c.s.readAhead
	} else {
		c.own = false
	}
	c.mu.Unlock()
	select {
	case c.freed <- struct{}{}:
	default:
	}
}

// Send sends buf as one DATA frame for file offset off. buf comes from GetBuffer(
// wire.DataHeaderLen+n) with the n bytes already at Payload()[wire.DataHeaderLen:]; Send takes
// ownership and releases it. It waits for credit.
func (o *OutStream) Send(buf *Buffer, off uint64) error {
	n := int64(len(buf.B) - wire.HeaderLen - wire.DataHeaderLen)
	if err := o.x.waitCredit(o.ctx, n); err != nil {
		buf.Release()
		if errors.Is(err, errStopped) {
			_, err = o.Finish() // the receiver's ERROR
		}
		return err
	}
	wire.PutDataOffset(buf.Payload(), off)
	return o.x.sendBuffer(wire.OpData, buf)
}

// End sends END with body. For a served stream (GET) this ends the exchange.
func (o *OutStream) End(body []byte) error {
	err := o.x.send(wire.OpEnd, 0, body)
	if !o.x.opener {
		o.x.end()
	}
	return err
}

// Finish waits for the receiver's verdict after End: its END reply (returned, release it) or
// an ERROR.
func (o *OutStream) Finish() (*Buffer, error) {
	defer o.x.in.close()
	f, err := o.x.in.pop(o.ctx, o.x)
	if err != nil {
		o.x.abandon()
		return nil, err
	}
	switch f.h.Op {
	case wire.OpEnd:
		o.x.end()
		return f.buf, nil
	case wire.OpError:
		o.x.end()
		return nil, errorFrame(f)
	}
	f.buf.Release()
	o.x.abandon()
	return nil, fmt.Errorf("%w: unexpected %v after END", ErrProtocol, f.h.Op)
}

// Abort abandons an outgoing stream that will not be finished.
func (o *OutStream) Abort() {
	if o.x.opener {
		o.x.abandon()
	} else if !o.x.finished() {
		o.x.end()
		o.x.send(wire.OpError, 0, (&wire.ErrorMsg{Code: wire.ECANCELED, Message: "sender aborted"}).AppendTo(nil))
	}
}

// Subscription is an exchange the peer keeps feeding after its head reply (WATCH): frames of
// any op arrive until either side ends it. One goroutine calls Next; Close may come from any.
type Subscription struct {
	x    *exchange
	done atomic.Bool // the peer's final frame or ERROR was seen
}

// errSubscriptionClosed wakes a Next blocked while Close runs.
var errSubscriptionClosed = errors.New("subscription closed")

// Subscribe sends a request that the peer answers with a head reply of op carrying FlagMore
// (its payload is discarded), then further frames for as long as the exchange lasts. ctx bounds
// the wait for the head only; the subscription lasts until Close, the peer's final frame, or the
// end of the session.
func (s *Session) Subscribe(ctx context.Context, op wire.Op, body []byte) (*Subscription, error) {
	x, err := s.request(ctx, op, body)
	if err != nil {
		return nil, err
	}
	f, err := x.reply(ctx)
	if err != nil {
		x.in.close()
		return nil, err
	}
	sub := &Subscription{x: x}
	if f.h.Flags&wire.FlagMore == 0 { // the peer ended it at once
		sub.done.Store(true)
		x.end()
	}
	f.buf.Release()
	return sub, nil
}

// Next returns the next frame's payload buffer (the caller releases it) and op. A final frame
// of the request's op ends the subscription: Next returns io.EOF from then on. An ERROR comes
// back as *wire.RemoteError; a done ctx returns ctx.Err() and leaves the subscription open.
func (sub *Subscription) Next(ctx context.Context) (*Buffer, wire.Op, error) {
	if sub.done.Load() {
		return nil, 0, io.EOF
	}
	f, err := sub.x.in.pop(ctx, sub.x)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case f.h.Op == wire.OpError:
		sub.done.Store(true)
		sub.x.end()
		return nil, 0, errorFrame(f)
	case f.h.Op == sub.x.op && f.h.Flags&wire.FlagMore == 0:
		sub.done.Store(true)
		sub.x.end()
		f.buf.Release()
		return nil, 0, io.EOF
	}
	return f.buf, f.h.Op, nil
}

// Close ends the subscription: the peer is sent CANCEL unless it already ended the exchange,
// queued frames are dropped and a Next blocked on another goroutine returns.
func (sub *Subscription) Close() {
	sub.x.abandon()
	sub.x.fail(errSubscriptionClosed)
}
