package rpc

import (
	"context"
	"errors"

	"github.com/peerfs/peerfs/internal/wire"
)

// Request is an exchange the peer opened, handed to Handler.ServeRequest. Its payload is valid
// until ServeRequest returns.
type Request struct {
	Op    wire.Op
	x     *exchange
	buf   *Buffer
	paced bool // reply frames wait for the opener's credit (Pace)
}

var errAnswered = errors.New("request already answered")

// Payload returns the request body.
func (r *Request) Payload() []byte { return r.buf.Payload() }

// Context is cancelled when the peer cancels the exchange or the link ends.
func (r *Request) Context() context.Context { return r.x.ctx }

// Session returns the link the request came on.
func (r *Request) Session() *Session { return r.x.s }

func (r *Request) release() {
	r.buf.Release()
	r.buf = nil
}

// Pace makes the reply frames flow under the opener's credit (LIST): window bytes of reply
// payload at first, more as its CREDIT frames come. Reply and ReplyMore then wait for credit.
// Call it before the first reply.
func (r *Request) Pace(window uint32) {
	r.x.sendCredit.Store(int64(window))
	r.x.pushed.Store(true) // CREDIT may come
	r.paced = true
}

// waitCredit takes credit for a reply of body on a paced exchange.
func (r *Request) waitCredit(body []byte) error {
	if !r.paced {
		return nil
	}
	return r.x.waitCredit(r.x.ctx, int64(len(body)))
}

// Reply sends the final reply frame.
func (r *Request) Reply(body []byte) error {
	if r.x.finished() {
		return errAnswered
	}
	if err := r.waitCredit(body); err != nil {
		return err
	}
	r.x.end()
	return r.x.send(r.Op, 0, body)
}

// ReplyMore sends one reply frame with more to follow; the last one goes with Reply.
func (r *Request) ReplyMore(body []byte) error {
	if r.x.finished() {
		return errAnswered
	}
	if err := r.waitCredit(body); err != nil {
		return err
	}
	return r.x.send(r.Op, wire.FlagMore, body)
}

// Send sends one non-final response frame of another op than the request's on this exchange:
// the EVENTS frames of a WATCH, which follow its head (ReplyMore) for as long as the opener
// keeps the exchange open. The exchange stays open; end it with Reply or Fail, or let the
// opener's CANCEL end it (Context is then done and Send returns an error).
func (r *Request) Send(op wire.Op, body []byte) error {
	if r.x.finished() {
		return errAnswered
	}
	return r.x.send(op, 0, body)
}

// ReplyBuffer sends the final reply with its payload already in buf (from GetBuffer) and
// releases buf: bulk replies (READ) are never copied.
func (r *Request) ReplyBuffer(buf *Buffer) error {
	if r.x.finished() {
		buf.Release()
		return errAnswered
	}
	r.x.end()
	return r.x.sendBuffer(r.Op, buf)
}

// Fail ends the exchange with an ERROR frame.
func (r *Request) Fail(code wire.Errno, msg string) error {
	if r.x.finished() {
		return errAnswered
	}
	r.x.end()
	m := wire.ErrorMsg{Code: code, Message: msg}
	return r.x.send(wire.OpError, 0, m.AppendTo(nil))
}

// Push answers with head and returns a stream to send DATA frames with, starting with window
// bytes of credit (the window the request announced). End the stream with OutStream.End.
func (r *Request) Push(head []byte, window uint32) (*OutStream, error) {
	r.x.pushed.Store(true)
	r.x.startStreaming()
	r.x.sendCredit.Store(int64(window))
	if err := r.x.send(r.Op, 0, head); err != nil {
		r.x.end()
		return nil, err
	}
	return &OutStream{x: r.x, ctx: r.x.ctx, budget: &chunkBudget{s: r.x.s, freed: make(chan struct{}, 1)}}, nil
}

// Accept answers with head, grants window bytes of credit and returns the stream of DATA the
// opener sends. After the stream's END, answer with ReplyEnd or Fail.
func (r *Request) Accept(head []byte, window uint32) (*InStream, error) {
	if window < wire.MinWindow {
		window = wire.MinWindow
	}
	r.x.recvAllowance.Store(int64(window))
	r.x.in.setDataLimit(int64(window))
	r.x.accepted.Store(true)
	if err := r.x.send(r.Op, 0, head); err != nil {
		r.x.end()
		return nil, err
	}
	c := wire.Credit{Bytes: window}
	if err := r.x.send(wire.OpCredit, 0, c.AppendTo(nil)); err != nil {
		r.x.end()
		return nil, err
	}
	return &InStream{x: r.x, window: int64(window)}, nil
}

// ReplyEnd sends the final END frame of an accepted stream.
func (r *Request) ReplyEnd(body []byte) error {
	if r.x.finished() {
		return errAnswered
	}
	r.x.end()
	return r.x.send(wire.OpEnd, 0, body)
}
