package rpc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/chunkbuf"
	"github.com/peerfs/peerfs/internal/loopback"
	"github.com/peerfs/peerfs/internal/wire"
)

// sessionPair starts two sessions over loopback TCP; b serves with h.
func sessionPair(t *testing.T, h Handler) (*Session, *Session) {
	t.Helper()
	ca, cb := loopback.Pair(t)
	var sb *Session
	var errb error
	done := make(chan struct{})
	go func() {
		sb, errb = New(cb, Options{Name: "b", Handler: h})
		close(done)
	}()
	sa, err := New(ca, Options{Name: "a"})
	<-done
	if err != nil || errb != nil {
		t.Fatalf("New: %v / %v", err, errb)
	}
	t.Cleanup(func() { sa.Close(nil); sb.Close(nil) })
	return sa, sb
}

type handlerFunc func(r *Request)

func (f handlerFunc) ServeRequest(r *Request) { f(r) }

func TestCallOutOfOrder(t *testing.T) {
	// STAT bodies carry a delay; replies echo the body. Later requests with shorter delays
	// overtake earlier ones.
	h := handlerFunc(func(r *Request) {
		d := time.Duration(binary.BigEndian.Uint32(r.Payload())) * time.Millisecond
		time.Sleep(d)
		r.Reply(r.Payload())
	})
	a, b := sessionPair(t, h)
	if a.PeerName() != "b" || b.PeerName() != "a" || a.Version() != wire.VersionMax {
		t.Fatalf("hello: names %q %q version %d", a.PeerName(), b.PeerName(), a.Version())
	}
	var mu sync.Mutex
	var order []uint32
	var wg sync.WaitGroup
	for _, ms := range []uint32{300, 150, 1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := binary.BigEndian.AppendUint32(nil, ms)
			buf, err := a.Call(context.Background(), wire.OpStat, body)
			if err != nil {
				t.Error(err)
				return
			}
			if !bytes.Equal(buf.Payload(), body) {
				t.Errorf("reply %x, want %x", buf.Payload(), body)
			}
			buf.Release()
			mu.Lock()
			order = append(order, ms)
			mu.Unlock()
		}()
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	if len(order) != 3 || order[0] != 1 || order[2] != 300 {
		t.Fatalf("replies in order %v, want the fastest first", order)
	}
}

func TestCallErrorAndMore(t *testing.T) {
	h := handlerFunc(func(r *Request) {
		switch r.Op {
		case wire.OpStat:
			r.Fail(wire.ENOENT, "no such file")
		case wire.OpReadDir:
			for i := 0; i < 3; i++ {
				r.ReplyMore([]byte{byte(i)})
			}
			r.Reply([]byte{3})
		case wire.OpShares:
			// returns without answering: the session answers EIO
		}
	})
	a, _ := sessionPair(t, h)
	ctx := context.Background()
	_, err := a.Call(ctx, wire.OpStat, nil)
	var re *wire.RemoteError
	if !errors.As(err, &re) || re.Code != wire.ENOENT || !errors.Is(err, wire.ENOENT) {
		t.Fatalf("Call error = %v, want ENOENT", err)
	}
	var got []byte
	if err := a.CallMore(ctx, wire.OpReadDir, nil, func(p []byte) error { got = append(got, p...); return nil }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, []byte{0, 1, 2, 3}) {
		t.Fatalf("CallMore frames %v", got)
	}
	if _, err := a.Call(ctx, wire.OpShares, nil); !errors.Is(err, wire.EIO) {
		t.Fatalf("unanswered request: %v, want EIO", err)
	}
}

func TestPushStreamWithCredit(t *testing.T) {
	data := make([]byte, 9<<20+12345)
	rand.Read(data)
	const window = 2 << 20 // smaller than the data, so credit must flow
	h := handlerFunc(func(r *Request) {
		out, err := r.Push([]byte("head"), window)
		if err != nil {
			return
		}
		for pos := 0; pos < len(data); {
			n := min(wire.MaxChunk/2, len(data)-pos)
			buf := GetBuffer(wire.DataHeaderLen + n)
			copy(buf.Payload()[wire.DataHeaderLen:], data[pos:pos+n])
			if err := out.Send(buf, uint64(pos)); err != nil {
				t.Errorf("Send: %v", err)
				return
			}
			pos += n
		}
		out.End([]byte("end"))
	})
	a, _ := sessionPair(t, h)
	head, in, err := a.OpenInStream(context.Background(), wire.OpGet, nil, window)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if string(head.Payload()) != "head" {
		t.Fatalf("head %q", head.Payload())
	}
	head.Release()
	var got bytes.Buffer
	for {
		buf, off, chunk, err := in.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if int(off) != got.Len() {
			t.Fatalf("chunk at %d, have %d", off, got.Len())
		}
		got.Write(chunk)
		in.Consumed(buf, len(chunk))
	}
	if !bytes.Equal(got.Bytes(), data) || string(in.End()) != "end" {
		t.Fatalf("stream content differs (%d bytes, end %q)", got.Len(), in.End())
	}
}

func TestOutStreamAndReceiverError(t *testing.T) {
	h := handlerFunc(func(r *Request) {
		in, err := r.Accept([]byte("ok"), wire.MaxChunk)
		if err != nil {
			return
		}
		defer in.Close()
		total := 0
		for {
			buf, _, chunk, err := in.Next(r.Context())
			if err == io.EOF {
				break
			}
			if err != nil {
				return
			}
			total += len(chunk)
			in.Consumed(buf, len(chunk))
			if total > 3<<20 && r.Op == wire.OpPut {
				r.Fail(wire.ENOSPC, "disk full")
				return
			}
		}
		r.ReplyEnd(binary.BigEndian.AppendUint64(nil, uint64(total)))
	})
	a, _ := sessionPair(t, h)
	send := func(op wire.Op, size int) error {
		head, out, err := a.OpenOutStream(context.Background(), op, nil)
		if err != nil {
			return err
		}
		head.Release()
		for pos := 0; pos < size; pos += 256 << 10 {
			buf := GetBuffer(wire.DataHeaderLen + 256<<10)
			if err := out.Send(buf, uint64(pos)); err != nil {
				return err
			}
		}
		if err := out.End(nil); err != nil {
			return err
		}
		v, err := out.Finish()
		if err != nil {
			return err
		}
		defer v.Release()
		if got := binary.BigEndian.Uint64(v.Payload()); got != uint64(size) {
			t.Errorf("receiver counted %d bytes, sent %d", got, size)
		}
		return nil
	}
	if err := send(wire.OpMkdir, 8<<20); err != nil {
		t.Fatalf("upload: %v", err)
	}
	// The receiver fails mid-stream: the sender, blocked on credit, gets the ERROR.
	if err := send(wire.OpPut, 64<<20); !errors.Is(err, wire.ENOSPC) {
		t.Fatalf("upload into a full disk: %v, want ENOSPC", err)
	}
}

func TestCancelStopsPush(t *testing.T) {
	stopped := make(chan error, 1)
	h := handlerFunc(func(r *Request) {
		out, _ := r.Push(nil, wire.MinWindow)
		// Whole chunks, as pulls send them: a stream of small chunks is held to the memory of
		// its window in whole chunks (dataLimitFor), and a run of 1 KiB chunks could pass that
		// before the CANCEL arrives and have the link closed instead.
		for i := 0; ; i++ {
			buf := GetBuffer(wire.DataHeaderLen + wire.MaxChunk)
			if err := out.Send(buf, uint64(i*wire.MaxChunk)); err != nil {
				stopped <- err
				return
			}
		}
	})
	a, _ := sessionPair(t, h)
	head, in, err := a.OpenInStream(context.Background(), wire.OpGet, nil, wire.MinWindow)
	if err != nil {
		t.Fatal(err)
	}
	head.Release()
	buf, _, _, err := in.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	buf.Release()
	in.Close() // never consumed: the sender is stuck on credit until CANCEL
	select {
	case err := <-stopped:
		if !errors.Is(err, ErrCanceled) {
			t.Fatalf("sender stopped with %v, want ErrCanceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sender never saw the cancel")
	}
}

func TestContextCancelAbandonsCall(t *testing.T) {
	release := make(chan struct{})
	h := handlerFunc(func(r *Request) {
		select {
		case <-r.Context().Done(): // the CANCEL arrives
		case <-release:
		}
		r.Reply(nil)
	})
	a, _ := sessionPair(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := a.Call(ctx, wire.OpStat, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	close(release)
	// The slot and the tag are free again.
	if buf, err := a.Call(context.Background(), wire.OpStat, nil); err != nil {
		t.Fatal(err)
	} else {
		buf.Release()
	}
}

func TestKeepaliveMeasuresRTT(t *testing.T) {
	a, _ := sessionPair(t, nil)
	deadline := time.Now().Add(5 * time.Second)
	for a.RTT() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if a.RTT() <= 0 || a.RTT() > time.Second {
		t.Fatalf("RTT = %v", a.RTT())
	}
	if a.BytesIn() == 0 || a.BytesOut() == 0 {
		t.Fatal("byte counters did not move")
	}
}

func TestPeerGoneFailsWaiters(t *testing.T) {
	block := make(chan struct{})
	h := handlerFunc(func(r *Request) { <-block; r.Reply(nil) })
	a, b := sessionPair(t, h)
	defer close(block)
	errc := make(chan error, 1)
	go func() {
		_, err := a.Call(context.Background(), wire.OpStat, nil)
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	b.Close(nil)
	select {
	case err := <-errc:
		if !errors.Is(err, ErrPeerGone) {
			t.Fatalf("err = %v, want ErrPeerGone", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("call hung after the peer closed")
	}
}

// rawPeer completes a HELLO by hand and returns the conn, so tests can send bad frames.
func rawPeer(t *testing.T, hello wire.Hello) (*Session, net.Conn, chan error) {
	t.Helper()
	// The handler never answers, so the exchanges a test opens stay open until the link ends.
	return rawPeerWith(t, hello, Options{Handler: handlerFunc(func(r *Request) { <-r.Context().Done() })})
}

// rawPeerWith is rawPeer with the session made with opts.
func rawPeerWith(t *testing.T, hello wire.Hello, opts Options) (*Session, net.Conn, chan error) {
	t.Helper()
	ca, cb := loopback.Pair(t)
	errc := make(chan error, 1)
	var s *Session
	done := make(chan struct{})
	go func() {
		var err error
		s, err = New(ca, opts)
		errc <- err
		close(done)
	}()
	b := hello.AppendTo(make([]byte, wire.HeaderLen))
	wire.Header{Len: uint32(len(b) - wire.HeaderLen), Op: wire.OpHello}.Put(b)
	cb.Write(b)
	var hdr [wire.HeaderLen]byte
	io.ReadFull(cb, hdr[:])
	h, _ := wire.ParseHeader(hdr[:])
	io.CopyN(io.Discard, cb, int64(h.Len))
	<-done
	t.Cleanup(func() {
		cb.Close()
		if s != nil {
			s.Close(nil)
		}
	})
	return s, cb, errc
}

var goodHello = wire.Hello{MinVersion: wire.VersionMin, MaxVersion: wire.VersionMax, MaxFrameLen: wire.MaxFrameLen, Name: "raw"}

func TestVersionMismatchRefused(t *testing.T) {
	_, _, errc := rawPeer(t, wire.Hello{MinVersion: 7, MaxVersion: 9, MaxFrameLen: wire.MaxFrameLen})
	err := <-errc
	if err == nil || !strings.Contains(err.Error(), "no common protocol version") {
		t.Fatalf("err = %v", err)
	}
}

func TestMalformedFramesCloseLink(t *testing.T) {
	frame := func(h wire.Header, body []byte) []byte {
		b := make([]byte, wire.HeaderLen, wire.HeaderLen+len(body))
		h.Put(b)
		binary.BigEndian.PutUint32(b, uint32(len(body)))
		return append(b, body...)
	}
	cases := map[string][]byte{
		"oversized": func() []byte {
			b := make([]byte, wire.HeaderLen)
			wire.Header{Op: wire.OpStat, Tag: 1}.Put(b)
			binary.BigEndian.PutUint32(b, wire.MaxFrameLen+1)
			return b
		}(),
		"reserved bits": func() []byte {
			b := frame(wire.Header{Op: wire.OpStat, Tag: 1}, nil)
			b[6] = 1
			return b
		}(),
		"unknown flags":    frame(wire.Header{Op: wire.OpStat, Tag: 1, Flags: 0x80}, nil),
		"short ping":       frame(wire.Header{Op: wire.OpPing}, []byte{1}),
		"second hello":     frame(wire.Header{Op: wire.OpHello}, goodHello.AppendTo(nil)),
		"bad credit":       append(frame(wire.Header{Op: wire.OpGet, Tag: 5}, nil), frame(wire.Header{Op: wire.OpCredit, Tag: 5}, []byte{1})...),
		"tag reuse":        append(frame(wire.Header{Op: wire.OpPut, Tag: 9}, nil), frame(wire.Header{Op: wire.OpPut, Tag: 9}, nil)...),
		"empty data":       append(frame(wire.Header{Op: wire.OpPut, Tag: 3}, nil), frame(wire.Header{Op: wire.OpData, Tag: 3}, make([]byte, 8))...),
		"data w/o credit":  append(frame(wire.Header{Op: wire.OpPut, Tag: 4}, nil), frame(wire.Header{Op: wire.OpData, Tag: 4}, make([]byte, 100))...),
		"request on tag 0": frame(wire.Header{Op: wire.OpStat, Tag: 0}, nil),
		// Frames the opener may not send on an exchange the peer serves: no handler reads them.
		"END on a GET":            append(frame(wire.Header{Op: wire.OpGet, Tag: 21}, nil), frame(wire.Header{Op: wire.OpEnd, Tag: 21}, make([]byte, 40))...),
		"END on a PUT not taken":  append(frame(wire.Header{Op: wire.OpPut, Tag: 22}, nil), frame(wire.Header{Op: wire.OpEnd, Tag: 22}, make([]byte, 40))...),
		"ERROR from the opener":   append(frame(wire.Header{Op: wire.OpStat, Tag: 23}, nil), frame(wire.Header{Op: wire.OpError, Tag: 23}, make([]byte, 6))...),
		"EVENTS from the opener":  append(frame(wire.Header{Op: wire.OpWatch, Tag: 24}, nil), frame(wire.Header{Op: wire.OpEvents, Tag: 24}, make([]byte, 4))...),
		"CREDIT to a plain reply": append(frame(wire.Header{Op: wire.OpStat, Tag: 25}, nil), frame(wire.Header{Op: wire.OpCredit, Tag: 25}, []byte{0, 0, 1, 0})...),
		"flood of END": func() []byte {
			b := frame(wire.Header{Op: wire.OpPut, Tag: 6}, nil)
			for i := 0; i*wire.MaxChunk <= MaxQueuedBytes; i++ {
				b = append(b, frame(wire.Header{Op: wire.OpEnd, Tag: 6}, make([]byte, wire.MaxChunk))...)
			}
			return b
		}(),
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			var s *Session
			var cb net.Conn
			var errc chan error
			s, cb, errc = rawPeer(t, goodHello)
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			cb.Write(bad)
			go io.Copy(io.Discard, cb)
			select {
			case <-s.Done():
				t.Logf("closed: %v", s.Err())
				if !errors.Is(s.Err(), ErrPeerGone) {
					t.Fatalf("ended with %v", s.Err())
				}
			case <-time.After(5 * time.Second):
				t.Fatal("link stayed open after a malformed frame")
			}
		})
	}
}

func TestHeaderZeroAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	var b [wire.HeaderLen]byte
	allocs := testing.AllocsPerRun(1000, func() {
		wire.Header{Len: 100, Op: wire.OpData, Tag: 7}.Put(b[:])
		if _, err := wire.ParseHeader(b[:]); err != nil {
			t.Fatal(err)
		}
		buf := GetBuffer(wire.DataHeaderLen + wire.MaxChunk)
		buf.Release()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per header round trip and pooled buffer", allocs)
	}
}

func TestSubscribe(t *testing.T) {
	// WATCH: an empty head with FlagMore, then EVENTS frames until the opener cancels. STATFS
	// stands in for a subscription the server ends itself, once normally and once with ERROR.
	cancelled := make(chan error, 1)
	h := handlerFunc(func(r *Request) {
		if err := r.ReplyMore(nil); err != nil {
			t.Error(err)
			return
		}
		for i := range 3 {
			if err := r.Send(wire.OpEvents, []byte{byte(i)}); err != nil {
				t.Error(err)
			}
		}
		switch r.Op {
		case wire.OpWatch:
			<-r.Context().Done()
			cancelled <- r.Send(wire.OpEvents, []byte{9})
		case wire.OpStatfs:
			r.Reply(nil)
		default:
			r.Fail(wire.ENOENT, "gone")
		}
	})
	a, _ := sessionPair(t, h)
	ctx := context.Background()

	next := func(sub *Subscription, want byte) {
		t.Helper()
		buf, op, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if op != wire.OpEvents || !bytes.Equal(buf.Payload(), []byte{want}) {
			t.Fatalf("frame %v %x, want EVENTS %x", op, buf.Payload(), want)
		}
		buf.Release()
	}

	sub, err := a.Subscribe(ctx, wire.OpWatch, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range byte(3) {
		next(sub, i)
	}
	// A Next blocked on another goroutine returns once Close runs.
	blocked := make(chan error, 1)
	go func() {
		_, _, err := sub.Next(ctx)
		blocked <- err
	}()
	time.Sleep(20 * time.Millisecond)
	sub.Close()
	select {
	case err := <-blocked:
		if err == nil {
			t.Fatal("Next after Close returned a frame")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next still blocked after Close")
	}
	select {
	case err := <-cancelled:
		if err == nil {
			t.Fatal("Send after the opener's CANCEL succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("server never saw the cancel")
	}

	for op, want := range map[wire.Op]error{wire.OpStatfs: io.EOF, wire.OpListXattr: &wire.RemoteError{}} {
		sub, err := a.Subscribe(ctx, op, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range byte(3) {
			next(sub, i)
		}
		_, _, err = sub.Next(ctx)
		var re *wire.RemoteError
		if want == io.EOF && err != io.EOF || want != io.EOF && !(errors.As(err, &re) && re.Code == wire.ENOENT) {
			t.Fatalf("%v: end of subscription %v, want %v", op, err, want)
		}
		if _, _, err := sub.Next(ctx); err == nil {
			t.Fatalf("%v: Next after the end returned a frame", op)
		}
		sub.Close()
	}
}

// inliner serves STAT on the read loop (Inline) after a pause, SHARES in a goroutine at once,
// and GET as a push stream that stays open until release is closed.
type inliner struct {
	release chan struct{}
}

func (h *inliner) Inline(op wire.Op, size int) bool { return op == wire.OpStat }

func (h *inliner) ServeRequest(r *Request) {
	switch r.Op {
	case wire.OpStat:
		time.Sleep(300 * time.Millisecond)
		r.Reply([]byte("stat"))
	case wire.OpShares:
		r.Reply([]byte("shares"))
	case wire.OpGet:
		out, err := r.Push(nil, wire.MinWindow)
		if err != nil {
			return
		}
		<-h.release
		out.End(nil)
	}
}

// TestInlineServing: a request the handler names inline is served on the read loop, so a
// request sent while it runs waits for it; while this side pushes a stream, the same request
// gets a goroutine and the later request is answered at once. The count of pushing exchanges
// returns to zero when the stream ends.
func TestInlineServing(t *testing.T) {
	h := &inliner{release: make(chan struct{})}
	a, b := sessionPair(t, h)
	ctx := context.Background()
	// sharesWait sends STAT, then SHARES 20 ms later, and returns how long SHARES took.
	sharesWait := func() time.Duration {
		t.Helper()
		stat := make(chan error, 1)
		go func() {
			buf, err := a.Call(ctx, wire.OpStat, nil)
			if err == nil {
				buf.Release()
			}
			stat <- err
		}()
		time.Sleep(20 * time.Millisecond)
		t0 := time.Now()
		buf, err := a.Call(ctx, wire.OpShares, nil)
		d := time.Since(t0)
		if err != nil {
			t.Fatal(err)
		}
		buf.Release()
		if err := <-stat; err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := sharesWait(); d < 200*time.Millisecond {
		t.Fatalf("without a stream: SHARES answered in %v while STAT ran; want it to wait (STAT inline)", d)
	}
	head, in, err := a.OpenInStream(ctx, wire.OpGet, nil, wire.MinWindow)
	if err != nil {
		t.Fatal(err)
	}
	head.Release()
	if n := b.streamsOut.Load(); n != 1 {
		t.Fatalf("streams out while pushing: %d, want 1", n)
	}
	if d := sharesWait(); d > 150*time.Millisecond {
		t.Fatalf("while pushing: SHARES took %v; want it answered while STAT runs in a goroutine", d)
	}
	close(h.release)
	if _, _, _, err := in.Next(ctx); err != io.EOF {
		t.Fatalf("end of stream: %v", err)
	}
	in.Close()
	for deadline := time.Now().Add(time.Second); b.streamsOut.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("streams out after the stream ended: %d", b.streamsOut.Load())
		}
	}
}

// TestWriteDataArrivesAligned: a WRITE's bulk bytes follow a head of any length, yet arrive
// on a page boundary when they are a whole number of pages (the owner writes them with
// O_DIRECT from there), and a buffer given back serves the next frame as before.
func TestWriteDataArrivesAligned(t *testing.T) {
	data := make([]byte, 1<<20)
	rand.Read(data)
	got := make(chan bool, 8)
	h := handlerFunc(func(r *Request) {
		p := r.Payload()
		bulk := p[len(p)-len(data):]
		got <- chunkbuf.Aligned(bulk) && bytes.Equal(bulk, data)
		r.Reply(nil)
	})
	a, _ := sessionPair(t, h)
	for _, head := range []int{1, 17, 100, 4095, 4096, 4097} {
		body := GetBuffer(head)
		for i := range body.Payload() {
			body.Payload()[i] = byte(i)
		}
		reply, err := a.CallBuffer(context.Background(), wire.OpWrite, body, data)
		if err != nil {
			t.Fatal(err)
		}
		reply.Release()
		if !<-got {
			t.Fatalf("head of %d bytes: the data arrived unaligned or changed", head)
		}
	}
	b := GetBuffer(wire.MaxFrameLen)
	if len(b.B) != wire.HeaderLen+wire.MaxFrameLen || !chunkbuf.Aligned(b.B[wire.HeaderLen+wire.DataHeaderLen:]) {
		t.Fatal("a buffer given back after a WRITE lost its DATA alignment")
	}
	b.Release()
}

// TestPacedRepliesWaitForCredit: a responder that paces a reply of 48 MiB (LIST) sends it no
// faster than a slow opener consumes it, never more than the window ahead, so the opener's
// queue stays far below MaxQueuedBytes and the whole reply arrives.
func TestPacedRepliesWaitForCredit(t *testing.T) {
	const window, frames, size = wire.MinWindow, 192, 256 << 10
	var sent atomic.Int64
	h := handlerFunc(func(r *Request) {
		r.Pace(window)
		body := make([]byte, size)
		for i := range frames {
			sent.Add(size)
			var err error
			if i == frames-1 {
				err = r.Reply(body)
			} else {
				err = r.ReplyMore(body)
			}
			if err != nil {
				t.Errorf("reply frame %d: %v", i, err)
				return
			}
		}
	})
	a, _ := sessionPair(t, h)
	var consumed int64
	n := 0
	err := a.CallPaced(context.Background(), wire.OpList, nil, window, func(p []byte) error {
		consumed += int64(len(p))
		n++
		if ahead := sent.Load() - consumed; ahead > window+size {
			t.Errorf("after %d frames the responder is %d bytes ahead, window %d", n, ahead, window)
		}
		time.Sleep(time.Millisecond) // a consumer slower than the sender
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != frames || consumed != frames*size {
		t.Fatalf("got %d frames, %d bytes; want %d, %d", n, consumed, frames, frames*size)
	}
}

// TestPacedReplyBeyondCreditClosesLink: a responder that sends more reply payload than the
// opener granted breaks the protocol: the opener closes the link instead of queueing it.
func TestPacedReplyBeyondCreditClosesLink(t *testing.T) {
	s, cb, errc := rawPeer(t, goodHello)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	callErr := make(chan error, 1)
	go func() {
		callErr <- s.CallPaced(context.Background(), wire.OpList, nil, wire.MinWindow, func([]byte) error {
			<-s.Done() // never consumes: credit is never granted back
			return nil
		})
	}()
	var req wire.Header
	for req.Op != wire.OpList { // skip a PING the session may send first
		var hdr [wire.HeaderLen]byte
		if _, err := io.ReadFull(cb, hdr[:]); err != nil {
			t.Fatal(err)
		}
		req, _ = wire.ParseHeader(hdr[:])
		io.CopyN(io.Discard, cb, int64(req.Len))
	}
	go io.Copy(io.Discard, cb)
	body := make([]byte, 512<<10)
	for range wire.MinWindow/len(body) + 1 {
		b := make([]byte, wire.HeaderLen, wire.HeaderLen+len(body))
		wire.Header{Len: uint32(len(body)), Op: wire.OpList, Flags: wire.FlagResponse | wire.FlagMore, Tag: req.Tag}.Put(b)
		if _, err := cb.Write(append(b, body...)); err != nil {
			break
		}
	}
	select {
	case <-s.Done():
		if !errors.Is(s.Err(), ErrPeerGone) {
			t.Fatalf("ended with %v", s.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("link stayed open after replies beyond credit")
	}
}
