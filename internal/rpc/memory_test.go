package rpc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/wire"
)

// rawFrame encodes one frame.
func rawFrame(h wire.Header, body []byte) []byte {
	b := make([]byte, wire.HeaderLen, wire.HeaderLen+len(body))
	h.Len = uint32(len(body))
	h.Put(b)
	return append(b, body...)
}

// acceptingPeer is rawPeer whose handler accepts every request as a stream of window bytes
// and consumes nothing until release is closed, then reads the stream to its end. With hoard
// it takes the chunks that arrive meanwhile off the queue and keeps them, as a handler writing
// to a slow disk does.
func acceptingPeer(t *testing.T, window uint32, hoard bool, release chan struct{}, keepalive time.Duration) (*Session, func([]byte) error) {
	t.Helper()
	s, cb, errc := rawPeerWith(t, goodHello, Options{Keepalive: keepalive, Handler: handlerFunc(func(r *Request) {
		in, err := r.Accept(nil, window)
		if err != nil {
			return
		}
		defer in.Close()
		type chunk struct {
			buf *Buffer
			n   int
		}
		var kept []chunk
		wait, stop := context.WithCancel(r.Context())
		go func() {
			select {
			case <-release:
			case <-wait.Done():
			}
			stop()
		}()
		for hoard {
			buf, _, data, err := in.Next(wait)
			if err != nil {
				break
			}
			kept = append(kept, chunk{buf, len(data)})
		}
		<-wait.Done()
		for _, c := range kept {
			in.Consumed(c.buf, c.n)
		}
		for {
			buf, _, data, err := in.Next(r.Context())
			if err != nil {
				r.ReplyEnd(nil)
				return
			}
			in.Consumed(buf, len(data))
		}
	})})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	go func() { // what the session sends is read and dropped
		b := make([]byte, 1<<20)
		for {
			if _, err := cb.Read(b); err != nil {
				return
			}
		}
	}()
	return s, func(b []byte) error { _, err := cb.Write(b); return err }
}

// TestSmallDataFramesCountAsTheirBuffers: DATA within credit but in frames of 65,525 bytes,
// each of which takes a chunk buffer, is stopped at the memory the window would take in full
// chunks: the link closes instead of holding 18 times the window.
func TestSmallDataFramesCountAsTheirBuffers(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	base := BuffersHeld()
	s, write := acceptingPeer(t, wire.MinWindow, false, release, 0)
	write(rawFrame(wire.Header{Op: wire.OpPut, Tag: 1}, nil))
	time.Sleep(50 * time.Millisecond) // the handler accepts: credit is granted
	data := make([]byte, 65525)
	var peak int64
	for off := 0; off+len(data)-wire.DataHeaderLen <= wire.MinWindow; off += len(data) - wire.DataHeaderLen {
		if write(rawFrame(wire.Header{Op: wire.OpData, Tag: 1}, data)) != nil {
			break
		}
		peak = max(peak, BuffersHeld()-base)
	}
	select {
	case <-s.Done():
		if !errors.Is(s.Err(), ErrPeerGone) {
			t.Fatalf("ended with %v", s.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the link stayed open holding %d MiB for a window of %d MiB", (BuffersHeld()-base)>>20, wire.MinWindow>>20)
	}
	if limit := int64(dataLimitFor(wire.MinWindow)) + 2<<20; peak > limit {
		t.Fatalf("held %d MiB before closing, limit %d MiB", peak>>20, limit>>20)
	}
}

// TestServedMemoryCapped: 16 streams accepted with 16 MiB windows whose handler does not
// consume yet; the peer fills every window with full chunks, 256 MiB within its credit. The
// session stops reading at MaxServedBytes, so the peer waits in TCP; once the handlers
// consume, every stream completes and the link stays up. The chunks count until released,
// whether they wait in the queue or in the handler's hands.
func TestServedMemoryCapped(t *testing.T) {
	for _, hoard := range []bool{false, true} {
		t.Run(fmt.Sprintf("hoard=%v", hoard), func(t *testing.T) { testServedMemoryCapped(t, hoard) })
	}
}

func testServedMemoryCapped(t *testing.T, hoard bool) {
	release := make(chan struct{})
	base := BuffersHeld()
	s, write := acceptingPeer(t, DefaultWindow, hoard, release, 0)
	const streams = 16
	for tag := uint32(1); tag <= streams; tag++ {
		write(rawFrame(wire.Header{Op: wire.OpPut, Tag: tag}, nil))
	}
	time.Sleep(100 * time.Millisecond) // the handlers accept
	bound := int64(MaxServedBytes + 4<<20)
	var peak int64
	sent := make(chan error, 1)
	go func() {
		chunk := make([]byte, wire.DataHeaderLen+wire.MaxChunk)
		for tag := uint32(1); tag <= streams; tag++ {
			for range DefaultWindow / wire.MaxChunk {
				if err := write(rawFrame(wire.Header{Op: wire.OpData, Tag: tag}, chunk)); err != nil {
					sent <- err
					return
				}
			}
			write(rawFrame(wire.Header{Op: wire.OpEnd, Tag: tag}, nil))
		}
		sent <- nil
	}()
	deadline := time.After(2 * time.Second)
watch:
	for {
		peak = max(peak, BuffersHeld()-base)
		if peak > bound {
			t.Fatalf("the session holds %d MiB for its peer's streams (bound %d MiB)", peak>>20, bound>>20)
		}
		select {
		case <-deadline:
			break watch
		case err := <-sent:
			t.Fatalf("the peer sent 256 MiB unconsumed without waiting (%v)", err)
		case <-time.After(time.Millisecond):
		}
	}
	t.Logf("peak held while the handlers waited: %d MiB", peak>>20)
	close(release)
	select {
	case err := <-sent:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the streams did not complete once their handlers consumed them")
	}
	if err := s.Err(); err != nil {
		t.Fatalf("link closed: %v", err)
	}
}

// TestServedMemoryStuckCloses: the read loop waits at MaxServedBytes for handlers that never
// release what they took. After three keepalive intervals without a release the link closes,
// giving the memory back, instead of staying open for good.
func TestServedMemoryStuckCloses(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	base := BuffersHeld()
	s, write := acceptingPeer(t, DefaultWindow, true, release, 100*time.Millisecond)
	const streams = 8 // 128 MiB within credit: twice the cap
	for tag := uint32(1); tag <= streams; tag++ {
		write(rawFrame(wire.Header{Op: wire.OpPut, Tag: tag}, nil))
	}
	time.Sleep(50 * time.Millisecond)
	go func() {
		chunk := make([]byte, wire.DataHeaderLen+wire.MaxChunk)
		for tag := uint32(1); tag <= streams; tag++ {
			for range DefaultWindow / wire.MaxChunk {
				if write(rawFrame(wire.Header{Op: wire.OpData, Tag: tag}, chunk)) != nil {
					return
				}
			}
		}
	}()
	select {
	case <-s.Done():
		t.Logf("closed: %v", s.Err())
	case <-time.After(5 * time.Second):
		t.Fatalf("the link stayed open holding %d MiB that no handler releases", (BuffersHeld()-base)>>20)
	}
}
