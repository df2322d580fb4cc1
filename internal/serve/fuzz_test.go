package serve

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/sharetest"
	"github.com/peerfs/peerfs/internal/wire"
)

// fuzzOps are the opcodes a fuzzed frame can carry: every one this version defines and two it
// does not, one in the request range.
var fuzzOps = append(wire.Ops(), 0x05, 0x3f)

// fuzzFrames decodes a fuzz input into frames: per frame an opcode index, flags, a tag and a
// 16-bit body length, then the body (cut short at the end of the input). Flags keep their two
// defined bits unless the top bit is set, so most frames pass the header check; tags are small
// so that requests and the frames that follow them meet.
func fuzzFrames(in []byte) [][]byte {
	var frames [][]byte
	for len(in) >= 5 {
		op := fuzzOps[int(in[0])%len(fuzzOps)]
		flags := in[1] & 0x03
		if in[1]&0x80 != 0 {
			flags = in[1]
		}
		tag := uint32(in[2])
		n := int(binary.BigEndian.Uint16(in[3:5]))
		in = in[5:]
		n = min(n, len(in))
		body := in[:n]
		in = in[n:]
		b := make([]byte, wire.HeaderLen+len(body))
		wire.Header{Len: uint32(len(body)), Op: op, Flags: wire.Flags(flags), Tag: tag}.Put(b)
		copy(b[wire.HeaderLen:], body)
		frames = append(frames, b)
	}
	return frames
}

// fuzzFrame is the inverse of one step of fuzzFrames, for seeds.
func fuzzFrame(op wire.Op, flags wire.Flags, tag uint8, body []byte) []byte {
	i := slices.Index(fuzzOps, op)
	b := []byte{byte(i), byte(flags), tag, byte(len(body) >> 8), byte(len(body))}
	return append(b, body...)
}

// diskHungry reports whether a frame would make the owner reserve real disk space (a PUT's
// announced size, a FALLOCATE's range) beyond a megabyte: the fuzzer must not fill the disk it
// runs on.
func diskHungry(frame []byte) bool {
	h, _ := wire.ParseHeader(frame)
	body := frame[wire.HeaderLen:]
	switch h.Op {
	case wire.OpPut:
		var m wire.PutReq
		return m.Decode(body) == nil && m.Size > 1<<20
	case wire.OpFallocate:
		var m wire.FallocateReq
		return m.Decode(body) == nil && (m.Offset > 1<<20 || m.Length > 1<<20)
	}
	return false
}

// FuzzServer drives a real Server on a writable share over a real rpc session (net.Pipe) with
// arbitrary sequences of frames. The share's sibling outside/ holds a canary and the share holds
// symlinks that lead to it. After each input the session is closed and every handler has
// returned; the input fails if outside/ or the directory holding both changed in any way, if the
// canary's contents ever came back in a reply, if the frame buffers in use went over
// memoryBound, or if any of them were still held once the link was gone.
func FuzzServer(f *testing.F) {
	tr, sh := openTree(f, false)
	sv := handlerFor(sh)
	// APPLY with a journal store of its own, outside the tree; batches after a gap wait briefly.
	journals, err := NewJournalStore(f.TempDir(), nil)
	if err != nil {
		f.Fatal(err)
	}
	journals.gapWait = 20 * time.Millisecond
	sv.Journals = journals
	outside := sharetest.Snapshot(f, tr.Outside)
	top := func() []string {
		ents, err := os.ReadDir(tr.Base)
		if err != nil {
			f.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	topBefore := top()

	f.Fuzz(func(t *testing.T, in []byte) {
		frames := fuzzFrames(in)
		base := rpc.BuffersHeld()
		owner, peer := net.Pipe()
		hello := wire.Hello{MinVersion: wire.VersionMin, MaxVersion: wire.VersionMax, MaxFrameLen: wire.MaxFrameLen, Name: "fuzz"}
		hb := hello.AppendTo(make([]byte, wire.HeaderLen))
		wire.Header{Len: uint32(len(hb) - wire.HeaderLen), Op: wire.OpHello}.Put(hb)
		// The owner's frames are kept, and a PONG is signalled: it comes after every frame
		// sent before the PING was routed.
		var got bytes.Buffer
		pong := make(chan struct{}, 1)
		read := make(chan struct{})
		go func() {
			defer close(read)
			var hdr [wire.HeaderLen]byte
			for {
				if _, err := io.ReadFull(peer, hdr[:]); err != nil {
					return
				}
				h, _ := wire.ParseHeader(hdr[:])
				got.Write(hdr[:])
				if _, err := io.CopyN(&got, peer, int64(h.Len)); err != nil {
					return
				}
				if h.Op == wire.OpPong {
					select {
					case pong <- struct{}{}:
					default:
					}
				}
			}
		}()
		go peer.Write(hb)
		s, err := rpc.New(owner, rpc.Options{Name: "owner", Handler: sv})
		if err != nil {
			t.Fatal(err)
		}
		var peak int64
		for _, fr := range frames {
			if diskHungry(fr) {
				continue
			}
			if _, err := peer.Write(fr); err != nil {
				break // the owner closed the link
			}
			peak = max(peak, rpc.BuffersHeld()-base)
		}
		peer.Write(rawFrame(wire.Header{Op: wire.OpPing}, make([]byte, wire.PingLen)))
		select {
		case <-pong:
		case <-s.Done():
		case <-time.After(time.Second):
		}
		s.Close(nil)
		peer.Close()
		<-read
		// Every handler has returned once every buffer is back: a request's buffer is
		// released when its handler returns.
		for end := time.Now().Add(5 * time.Second); rpc.BuffersHeld() > base && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		if n := rpc.BuffersHeld() - base; n > 0 {
			t.Fatalf("%d KiB of frame buffers still held after the link closed", n>>10)
		}
		if peak > memoryBound {
			t.Fatalf("the link held %d MiB of frame buffers (bound %d MiB)", peak>>20, memoryBound>>20)
		}
		if bytes.Contains(got.Bytes(), []byte(sharetest.CanaryContent)) && !bytes.Contains(in, []byte(sharetest.CanaryContent)) {
			t.Fatal("the canary outside the share was read back through the server")
		}
		if now := top(); !slices.Equal(now, topBefore) {
			t.Fatalf("the directory holding the share changed: %v, was %v", now, topBefore)
		}
		sharetest.SameSnapshot(t, "outside", outside, sharetest.Snapshot(t, tr.Outside))
	})
}
