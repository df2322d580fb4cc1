// Package rpc runs one peer link: a multiplexed, versioned session of tagged exchanges over a
// single verified connection. Either side may open exchanges; replies come back out of order;
// bulk data travels in credit-controlled streams as raw bytes after a small header.
//
// Incoming flow (one goroutine, readLoop):
//
//  1. read the 12-byte header (bufio) and validate it (wire.ParseHeader);
//  2. read the payload straight into a pooled Buffer sized for it;
//  3. route by tag and direction: link control is handled here (PONG is answered from another
//     goroutine, so readLoop never writes and two busy peers cannot deadlock on full sockets);
//     requests start a handler goroutine (or, if the handler calls them quick and this side
//     pushes no stream, are served right here: Inliner); everything else is queued on its
//     exchange.
//  4. count the frames the peer sent on the exchanges it opened until they are released
//     (requests in service, queued frames, upload chunks being written) and stop reading
//     while they hold more than MaxServedBytes.
//
// Memory is counted by the buffer a frame occupies (Buffer.Cap), never by its length field:
// docs/PROTOCOL.md (Memory limits) gives the limits and the bound per link.
//
// Outgoing frames are written by the goroutine that produced them, one Write per frame, under
// writeMu. The package knows no files, shares or TLS; see internal/transport and internal/node.
package rpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peerfs/peerfs/internal/chunkbuf"
	"github.com/peerfs/peerfs/internal/wire"
)

// Tuning constants.
const (
	// MaxInFlight is how many exchanges one side may have open at once; callers past it wait
	// for a slot. The serving side refuses past twice this (cancelled exchanges linger briefly).
	MaxInFlight = 64
	// MaxQueuedFrames bounds the frames queued on one exchange and not yet consumed. A sender
	// within its credit that still exceeds it is sending absurdly small chunks: the link closes.
	MaxQueuedFrames = 4096
	// MaxQueuedBytes bounds the memory (Buffer.Cap: the buffer a frame occupies, not its
	// length) of frames other than DATA queued on one exchange: replies, END, ERROR. 64 READDIR
	// batches fit. Past it the peer is flooding: the link closes. The memory of queued DATA is
	// bounded by the stream's window in full chunks (dataLimitFor).
	MaxQueuedBytes = 32 << 20
	// MaxServedBytes bounds the memory of the frames the peer has made this side hold for the
	// exchanges it opened, until each is released: requests being served, frames queued on
	// them, the chunks of its uploads a handler is writing. Past it the read loop stops reading
	// until handlers have released some: the peer waits in TCP, not in our memory. Requests
	// that wait for the peer (GET, WATCH, PUT) have small bodies and every other frame is
	// released without the read loop, so the pause always ends.
	MaxServedBytes = 64 << 20
	// PushReadAhead is the memory of the chunks the streams this side pushes for the peer (GET,
	// STREAM) may read ahead beyond one chunk each, per link: a peer that neither reads its
	// socket nor grants credit holds one chunk per stream and this much in all, not the sender's
	// whole read-ahead (bulk) on each of its 128 exchanges.
	PushReadAhead = 32 << 20
	// controlQueue is how many control frames (PONG, refusals) readLoop may have waiting for
	// controlLoop. A peer that fills it by flooding PINGs loses PONGs; by flooding refused
	// requests, its link.
	controlQueue = 64
	// DefaultWindow is the credit a stream receiver grants: 16 MiB keeps a 1 GiB/s stream busy
	// across 10 ms of round trip while bounding memory per stream.
	DefaultWindow = 16 << 20
	// DefaultKeepalive is the PING interval; a link silent for 3 intervals is closed.
	DefaultKeepalive = 10 * time.Second
	// helloTimeout bounds the version negotiation after the TLS handshake.
	helloTimeout = 10 * time.Second
)

// Errors callers branch on.
var (
	// ErrPeerGone: the link closed; the cause is wrapped.
	ErrPeerGone = errors.New("peer connection closed")
	// ErrProtocol: the peer broke the protocol; the link is closed.
	ErrProtocol = errors.New("protocol violation")
	// ErrCanceled: the exchange was cancelled by the other side.
	ErrCanceled = errors.New("exchange canceled by peer")
)

// Handler serves the exchanges a peer opens. ServeRequest runs in its own goroutine and must
// end the exchange (Reply, Fail, or through a stream) before returning; if it does not, the
// session fails the exchange with EIO.
type Handler interface {
	ServeRequest(r *Request)
}

// Inliner is a Handler that names the requests it serves quickly and without waiting for the
// network: a file operation on the local disk with a small reply. The session serves those on
// its read loop instead of a goroutine of their own while it sends no stream (below): a
// sequential workload (a git checkout: create, write, create...) then spares a goroutine
// start and the wake-up of another thread per request, a tenth of each request's cost on a
// two-core virtual machine. Any other request, and every request while this side pushes a
// stream, gets its goroutine: a read loop blocked in writing a reply while both sides' send
// buffers are full of stream data could deadlock the link.
type Inliner interface {
	Handler
	// Inline reports whether a request of op with a payload of size bytes may be served on
	// the read loop.
	Inline(op wire.Op, size int) bool
}

// Options configure a Session.
type Options struct {
	Name      string        // our device name, sent in HELLO
	Handler   Handler       // serves incoming requests; nil refuses them all
	Logger    *slog.Logger  // nil discards
	Keepalive time.Duration // 0 means DefaultKeepalive
}

// Session is one established link. All methods are safe for concurrent use.
type Session struct {
	conn      net.Conn
	br        *bufio.Reader
	handler   Handler
	log       *slog.Logger
	keepalive time.Duration

	version  uint16
	peerName string

	writeMu sync.Mutex // serialises frames on conn

	// exchanges, guarded by mu
	mu      sync.Mutex
	nextTag uint32
	opened  map[uint32]*exchange // we opened; the peer's frames carry FlagResponse
	served  map[uint32]*exchange // the peer opened
	slots   chan struct{}        // our open exchanges, at most MaxInFlight

	control  chan *Buffer  // complete frames queued by readLoop for controlLoop
	readDone chan struct{} // closed when readLoop returns: nothing is queued on control after
	// streamsOut counts the exchanges on which this side sends DATA (a pushed GET or STREAM,
	// an opened PUT); requests are served inline only while it is 0 (Inliner).
	streamsOut atomic.Int32

	// servedHeld is the memory of the frames the peer sent on the exchanges it opened and not
	// yet released (MaxServedBytes); paused says the read loop waits for it to fall, unpause
	// wakes it.
	servedHeld atomic.Int64
	paused     atomic.Bool
	unpause    chan struct{}
	violated   atomic.Bool // a protocol violation was logged: later ones are not
	// readAhead holds a token per chunk beyond the first that pushed streams hold (PushReadAhead).
	readAhead chan struct{}

	closeOnce sync.Once
	done      chan struct{} // closed when the session ends
	closeErr  error         // set before done closes

	bytesIn  atomic.Uint64
	bytesOut atomic.Uint64
	rttNs    atomic.Int64
	lastRecv atomic.Int64 // monotonic ns since start
	start    time.Time
	loops    sync.WaitGroup
}

// New negotiates the protocol version over conn (HELLO both ways) and starts the session's
// loops. conn is normally a verified *transport.Conn. On error conn is closed.
func New(conn net.Conn, opts Options) (*Session, error) {
	s := &Session{
		conn:      conn,
		br:        bufio.NewReaderSize(conn, 64<<10),
		handler:   opts.Handler,
		log:       opts.Logger,
		keepalive: opts.Keepalive,
		opened:    make(map[uint32]*exchange),
		served:    make(map[uint32]*exchange),
		slots:     make(chan struct{}, MaxInFlight),
		control:   make(chan *Buffer, controlQueue),
		readDone:  make(chan struct{}),
		unpause:   make(chan struct{}, 1),
		readAhead: make(chan struct{}, PushReadAhead/chunkbuf.Len),
		done:      make(chan struct{}),
		start:     time.Now(),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.keepalive <= 0 {
		s.keepalive = DefaultKeepalive
	}
	if err := s.hello(opts.Name); err != nil {
		conn.Close()
		return nil, err
	}
	s.lastRecv.Store(s.now())
	s.loops.Add(3)
	go s.readLoop()
	go s.keepaliveLoop()
	go s.controlLoop()
	return s, nil
}

func (s *Session) now() int64 { return int64(time.Since(s.start)) }

func (s *Session) hello(name string) error {
	ours := wire.Hello{MinVersion: wire.VersionMin, MaxVersion: wire.VersionMax, MaxFrameLen: wire.MaxFrameLen, Name: name}
	s.conn.SetDeadline(time.Now().Add(helloTimeout))
	defer s.conn.SetDeadline(time.Time{})

	errc := make(chan error, 1)
	go func() {
		b := ours.AppendTo(make([]byte, wire.HeaderLen, 128))
		wire.Header{Len: uint32(len(b) - wire.HeaderLen), Op: wire.OpHello}.Put(b)
		_, err := s.conn.Write(b)
		errc <- err
	}()
	var hdr [wire.HeaderLen]byte
	if _, err := io.ReadFull(s.br, hdr[:]); err != nil {
		return fmt.Errorf("reading HELLO: %w", err)
	}
	h, err := wire.ParseHeader(hdr[:])
	if err != nil || h.Op != wire.OpHello || h.Tag != 0 || h.Flags != 0 || h.Len > 4096 {
		return fmt.Errorf("%w: first frame is not a valid HELLO (%v, %v): the peer does not speak the peerfs protocol", ErrProtocol, h, err)
	}
	body := make([]byte, h.Len)
	if _, err := io.ReadFull(s.br, body); err != nil {
		return fmt.Errorf("reading HELLO: %w", err)
	}
	var theirs wire.Hello
	if err := theirs.Decode(body); err != nil {
		return fmt.Errorf("%w: HELLO: %v", ErrProtocol, err)
	}
	if err := <-errc; err != nil {
		return fmt.Errorf("sending HELLO: %w", err)
	}
	v, err := wire.NegotiateVersion(ours, theirs)
	if err != nil {
		return err
	}
	if theirs.MaxFrameLen < wire.MaxFrameLen {
		return fmt.Errorf("%w: peer accepts frames of only %d bytes, this version needs %d", ErrProtocol, theirs.MaxFrameLen, wire.MaxFrameLen)
	}
	s.version, s.peerName = v, theirs.Name
	return nil
}

// Version returns the negotiated protocol version.
func (s *Session) Version() int { return int(s.version) }

// PeerName returns the name the peer announced in HELLO (informative, not authenticated).
func (s *Session) PeerName() string { return s.peerName }

// RTT returns the last measured keepalive round trip, 0 before the first.
func (s *Session) RTT() time.Duration { return time.Duration(s.rttNs.Load()) }

// BytesIn and BytesOut count frame bytes (headers included) received and sent.
func (s *Session) BytesIn() uint64  { return s.bytesIn.Load() }
func (s *Session) BytesOut() uint64 { return s.bytesOut.Load() }

// Done is closed when the session has ended; Err then says why.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns why the session ended, or nil while it runs.
func (s *Session) Err() error {
	select {
	case <-s.done:
		return s.closeErr
	default:
		return nil
	}
}

// Close ends the session, telling the peer why when reason is not nil, and waits for its loops.
func (s *Session) Close(reason error) {
	if reason != nil {
		var code wire.Errno = wire.EIO
		if errors.Is(reason, ErrProtocol) {
			code = wire.ErrnoProtocol
		}
		msg := wire.ErrorMsg{Code: code, Message: reason.Error()}
		b := msg.AppendTo(make([]byte, wire.HeaderLen, 256))
		s.conn.SetWriteDeadline(time.Now().Add(time.Second))
		s.writeFrame(wire.Header{Op: wire.OpClose, Len: uint32(len(b) - wire.HeaderLen)}, b)
	} else {
		reason = errors.New("closed locally")
	}
	s.shutdown(reason)
	s.loops.Wait()
}

// shutdown ends the session once: closes the connection and fails every exchange.
func (s *Session) shutdown(cause error) {
	s.closeOnce.Do(func() {
		s.closeErr = fmt.Errorf("%w: %w", ErrPeerGone, cause)
		close(s.done)
		s.conn.Close()
		s.mu.Lock()
		all := make([]*exchange, 0, len(s.opened)+len(s.served))
		for _, x := range s.opened {
			all = append(all, x)
		}
		for _, x := range s.served {
			all = append(all, x)
		}
		s.mu.Unlock()
		for _, x := range all {
			x.fail(s.closeErr)
		}
	})
}

// violation closes the link after a protocol error by the peer, with a logged reason.
func (s *Session) violation(format string, args ...any) {
	err := fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
	if s.violated.Swap(true) {
		return // the link is already closing for the first one
	}
	s.log.Warn("closing link: peer broke the protocol", "err", err)
	go s.Close(err)
}

// writeFrame fills the header into b[:HeaderLen] and writes the frame in one Write.
func (s *Session) writeFrame(h wire.Header, b []byte) error {
	h.Put(b)
	return s.writeRaw(b)
}

// writeRaw writes a complete frame, header included, in one Write.
func (s *Session) writeRaw(b []byte) error { return s.writeParts(b, nil) }

// buffersWriter is a connection that writes several slices as one contiguous write
// (transport.Conn).
type buffersWriter interface {
	WriteBuffers(bufs ...[]byte) (int, error)
}

// writeParts writes a complete frame made of head (header included) and then data, which may
// be empty, without joining them: a bulk payload is not copied. On a connection that cannot
// write both at once they go as two writes, still contiguous under writeMu.
func (s *Session) writeParts(head, data []byte) error {
	s.writeMu.Lock()
	var err error
	bw, ok := s.conn.(buffersWriter)
	switch {
	case len(data) == 0:
		_, err = s.conn.Write(head)
	case ok:
		_, err = bw.WriteBuffers(head, data)
	default:
		if _, err = s.conn.Write(head); err == nil {
			_, err = s.conn.Write(data)
		}
	}
	s.writeMu.Unlock()
	if err != nil {
		s.shutdown(fmt.Errorf("write: %w", err))
		return s.closeErr
	}
	s.bytesOut.Add(uint64(len(head) + len(data)))
	return nil
}

// errTooLong: a frame body exceeds wire.MaxFrameLen; nothing was sent.
var errTooLong = errors.New("frame body longer than MaxFrameLen")

// sendSmall writes a frame whose payload is copied from body into a pooled buffer.
func (s *Session) sendSmall(op wire.Op, flags wire.Flags, tag uint32, body []byte) error {
	if len(body) > wire.MaxFrameLen {
		return errTooLong
	}
	buf := GetBuffer(len(body))
	copy(buf.Payload(), body)
	err := s.writeFrame(wire.Header{Len: uint32(len(body)), Op: op, Flags: flags, Tag: tag}, buf.B)
	buf.Release()
	return err
}

func (s *Session) readLoop() {
	defer s.loops.Done()
	defer close(s.readDone)
	var hdr [wire.HeaderLen]byte
	for {
		if _, err := io.ReadFull(s.br, hdr[:]); err != nil {
			s.shutdown(readErr(err))
			return
		}
		h, err := wire.ParseHeader(hdr[:])
		if err != nil {
			s.violation("frame header: %v", err)
			return
		}
		var buf *Buffer
		if h.Op == wire.OpWrite && h.Flags&wire.FlagResponse == 0 {
			buf = GetTailAligned(int(h.Len))
		} else {
			buf = GetBuffer(int(h.Len))
		}
		if _, err := io.ReadFull(s.br, buf.Payload()); err != nil {
			buf.Release()
			s.shutdown(readErr(err))
			return
		}
		s.bytesIn.Add(uint64(wire.HeaderLen) + uint64(h.Len))
		s.lastRecv.Store(s.now())
		if !s.route(h, buf) {
			return
		}
		if s.servedHeld.Load() > MaxServedBytes && !s.waitServed() {
			return
		}
	}
}

// holdServed counts buf, a frame the peer sent on an exchange it opened, in MaxServedBytes
// until it is released: queued, taken by a handler (the chunks of a PUT being written) or
// being served (a request).
func (s *Session) holdServed(buf *Buffer) {
	buf.served = s
	s.servedHeld.Add(int64(buf.Cap()))
}

// releaseServed takes n bytes out of the count and wakes a read loop waiting for room.
func (s *Session) releaseServed(n int) {
	if s.servedHeld.Add(-int64(n)) <= MaxServedBytes && s.paused.Load() {
		select {
		case s.unpause <- struct{}{}:
		default:
		}
	}
}

// waitServed holds the read loop while the peer's exchanges hold more than MaxServedBytes. It
// returns false if the session ended meanwhile. For the keepalive, each release that wakes it
// counts as a frame received: a pause in which handlers make progress is not silence, one in
// which nothing is released for three intervals closes the link.
func (s *Session) waitServed() bool {
	s.paused.Store(true) // before the check below, so a release in between wakes us
	defer s.paused.Store(false)
	for s.servedHeld.Load() > MaxServedBytes {
		select {
		case <-s.unpause:
			s.lastRecv.Store(s.now())
		case <-s.done:
			return false
		}
	}
	return true
}

func readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("connection closed by peer")
	}
	return fmt.Errorf("read: %w", err)
}

// route dispatches one frame and takes ownership of buf. It returns false when the session
// must stop reading.
func (s *Session) route(h wire.Header, buf *Buffer) bool {
	switch h.Op {
	case wire.OpPing:
		if len(buf.Payload()) != wire.PingLen {
			buf.Release()
			s.violation("PING of %d bytes", h.Len)
			return false
		}
		wire.Header{Len: wire.PingLen, Op: wire.OpPong}.Put(buf.B)
		select {
		case s.control <- buf: // readLoop never writes; controlLoop does
		default:
			buf.Release() // a peer flooding PINGs loses PONGs
		}
		return true
	case wire.OpPong:
		if len(buf.Payload()) == wire.PingLen {
			sent := int64(binary.BigEndian.Uint64(buf.Payload()))
			if rtt := s.now() - sent; rtt >= 0 {
				s.rttNs.Store(rtt)
			}
		}
		buf.Release()
		return true
	case wire.OpClose:
		var m wire.ErrorMsg
		reason := "no reason given"
		if m.Decode(buf.Payload()) == nil {
			reason = m.Message
		}
		buf.Release()
		s.shutdown(fmt.Errorf("peer closed the link: %s", reason))
		return false
	case wire.OpHello:
		buf.Release()
		s.violation("second HELLO")
		return false
	}

	if h.Flags&wire.FlagResponse != 0 {
		s.mu.Lock()
		x := s.opened[h.Tag]
		s.mu.Unlock()
		if x == nil { // late frame of an exchange we abandoned
			buf.Release()
			return true
		}
		return s.deliver(x, h, buf)
	}

	if h.Op.IsRequest() || (!h.Op.Known() && h.Op >= wire.OpShares) {
		return s.startServed(h, buf)
	}
	s.mu.Lock()
	x := s.served[h.Tag]
	s.mu.Unlock()
	if x == nil {
		buf.Release()
		return true
	}
	return s.deliver(x, h, buf)
}

// deliver hands a frame to its exchange: credit and cancel act at once, the rest is queued.
func (s *Session) deliver(x *exchange, h wire.Header, buf *Buffer) bool {
	if !x.opener {
		if x.finished() { // raced with the exchange's end: as if its tag were closed
			buf.Release()
			return true
		}
		if why := unexpected(x, h.Op); why != "" {
			buf.Release()
			s.violation("%v on tag %d, which serves %v: %s", h.Op, h.Tag, x.op, why)
			return false
		}
	}
	switch h.Op {
	case wire.OpCredit:
		var c wire.Credit
		err := c.Decode(buf.Payload())
		buf.Release()
		if err != nil {
			s.violation("%v", err)
			return false
		}
		if !x.opener && !x.pushed.Load() {
			s.violation("CREDIT on tag %d, which serves %v: no stream toward the opener", h.Tag, x.op)
			return false
		}
		x.addCredit(int64(c.Bytes))
		return true
	case wire.OpCancel:
		buf.Release()
		x.fail(ErrCanceled)
		return true
	case wire.OpData:
		n := int64(h.Len) - wire.DataHeaderLen
		if n <= 0 {
			buf.Release()
			s.violation("DATA of %d bytes on tag %d", h.Len, h.Tag)
			return false
		}
		if x.recvAllowance.Add(-n) < 0 {
			buf.Release()
			s.violation("DATA beyond granted credit on tag %d", h.Tag)
			return false
		}
	case x.op:
		if x.paced.Load() && x.recvAllowance.Add(-int64(h.Len)) < 0 {
			buf.Release()
			s.violation("%v reply beyond granted credit on tag %d", h.Op, h.Tag)
			return false
		}
	}
	if h.Op == wire.OpError {
		defer x.stop()
	}
	if !x.opener {
		s.holdServed(buf)
	}
	if !x.in.push(frame{h: h, buf: buf}) {
		s.violation("more than %d unconsumed frames, %d MiB of them other than DATA or DATA beyond its window's chunks on tag %d", MaxQueuedFrames, MaxQueuedBytes>>20, h.Tag)
		return false
	}
	return true
}

// unexpected says why the opener of a served exchange may not send op at this point, or ""
// if it may (docs/PROTOCOL.md, section 5): CANCEL at any time, CREDIT to a stream this side
// pushes, DATA and then one END to a stream this side accepted. A handler reads nothing else,
// so anything else would sit in memory until the exchange ends.
func unexpected(x *exchange, op wire.Op) string {
	switch op {
	case wire.OpCancel, wire.OpCredit: // CREDIT is judged once its body is (deliver)
		return ""
	case wire.OpData, wire.OpEnd:
		switch {
		case !x.accepted.Load():
			return "no stream from the opener"
		case x.inEnded.Load():
			return "after the stream's END"
		}
		if op == wire.OpEnd {
			x.inEnded.Store(true)
		}
		return ""
	}
	return "the opener sends only CANCEL, CREDIT, DATA and END after its request"
}

func (s *Session) startServed(h wire.Header, buf *Buffer) bool {
	if h.Tag == 0 {
		buf.Release()
		s.violation("request %v on tag 0", h.Op)
		return false
	}
	s.mu.Lock()
	if _, dup := s.served[h.Tag]; dup {
		s.mu.Unlock()
		buf.Release()
		s.violation("request %v reuses open tag %d", h.Op, h.Tag)
		return false
	}
	if len(s.served) >= 2*MaxInFlight || s.handler == nil || !h.Op.Known() {
		s.mu.Unlock()
		buf.Release()
		code, msg := wire.EBUSY, "too many requests in flight"
		if s.handler == nil {
			code, msg = wire.EACCES, "this peer serves no requests"
		} else if !h.Op.Known() {
			code, msg = wire.ErrnoUnsupported, fmt.Sprintf("unknown request %v", h.Op)
		}
		m := wire.ErrorMsg{Code: code, Message: msg}
		body := m.AppendTo(nil)
		out := GetBuffer(len(body))
		copy(out.Payload(), body)
		wire.Header{Len: uint32(len(body)), Op: wire.OpError, Flags: wire.FlagResponse, Tag: h.Tag}.Put(out.B)
		select {
		case s.control <- out:
			return true
		default:
			out.Release()
			s.violation("peer floods refused requests")
			return false
		}
	}
	x := newExchange(s, h.Tag, h.Op, false)
	s.served[h.Tag] = x
	s.mu.Unlock()
	s.holdServed(buf) // until the handler returns (Request.release)

	r := &Request{x: x, Op: h.Op, buf: buf}
	if in, ok := s.handler.(Inliner); ok && s.streamsOut.Load() == 0 && in.Inline(h.Op, int(h.Len)) {
		s.serve(r)
		return true
	}
	go s.serve(r)
	return true
}

func (s *Session) serve(r *Request) {
	defer func() {
		r.release()
		if !r.x.finished() {
			r.x.end()
			s.sendSmall(wire.OpError, wire.FlagResponse, r.x.tag,
				(&wire.ErrorMsg{Code: wire.EIO, Message: "request not answered"}).AppendTo(nil))
		}
	}()
	s.handler.ServeRequest(r)
}

// controlLoop writes the frames readLoop queues (PONG, refusals), so readLoop never blocks on
// a full socket.
func (s *Session) controlLoop() {
	defer s.loops.Done()
	for {
		select {
		case <-s.done:
			// readLoop may still queue a frame it was routing when the link ended; its
			// buffer would stay out of the pool for good (FuzzServer found it).
			<-s.readDone
			for {
				select {
				case buf := <-s.control:
					buf.Release()
				default:
					return
				}
			}
		case buf := <-s.control:
			s.writeRaw(buf.B)
			buf.Release()
		}
	}
}

func (s *Session) keepaliveLoop() {
	defer s.loops.Done()
	t := time.NewTicker(s.keepalive)
	defer t.Stop()
	var b [wire.HeaderLen + wire.PingLen]byte
	ping := func() {
		binary.BigEndian.PutUint64(b[wire.HeaderLen:], uint64(s.now()))
		s.writeFrame(wire.Header{Len: wire.PingLen, Op: wire.OpPing}, b[:])
	}
	ping() // a first RTT right away
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			if idle := time.Duration(s.now() - s.lastRecv.Load()); idle > 3*s.keepalive {
				if s.paused.Load() {
					held := s.servedHeld.Load() >> 20
					s.log.Warn("closing link: the peer's frames fill this side's memory and none was released", "held_mib", held, "for", idle.Round(time.Millisecond))
					s.shutdown(fmt.Errorf("the peer's frames held %d MiB here and none was released for %v", held, idle.Round(time.Millisecond)))
					return
				}
				s.log.Warn("closing link: peer stopped answering", "silent", idle.Round(time.Millisecond))
				s.shutdown(fmt.Errorf("peer silent for %v", idle.Round(time.Second)))
				return
			}
			ping()
		}
	}
}

// open registers a new exchange we start, waiting for a slot.
func (s *Session) open(ctx context.Context, op wire.Op) (*exchange, error) {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.done:
		return nil, s.closeErr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		s.nextTag++
		if s.nextTag == 0 {
			continue
		}
		if _, busy := s.opened[s.nextTag]; !busy {
			break
		}
	}
	x := newExchange(s, s.nextTag, op, true)
	s.opened[x.tag] = x
	return x, nil
}

// forget removes a finished exchange from its table.
func (s *Session) forget(x *exchange) {
	s.mu.Lock()
	if x.opener {
		if s.opened[x.tag] == x {
			delete(s.opened, x.tag)
			<-s.slots
		}
	} else if s.served[x.tag] == x {
		delete(s.served, x.tag)
	}
	s.mu.Unlock()
}
