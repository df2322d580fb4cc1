package serve

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/loopback"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/share"
	"github.com/peerfs/peerfs/internal/wire"
)

// memoryBound is what one link may make its owner hold in frame buffers, whatever the peer
// sends (docs/PROTOCOL.md, section 10).
const memoryBound = 256 << 20

// servePair starts an owner session serving sv on one end of a loopback TCP connection and
// returns the other end, past the HELLOs, for a test to speak raw frames on. What the owner
// sends is read and discarded, as a peer that keeps reading its socket would.
func servePair(t testing.TB, sv *Handler) (*rpc.Session, net.Conn) {
	t.Helper()
	peer, owner := loopback.Pair(t)
	hello := wire.Hello{MinVersion: wire.VersionMin, MaxVersion: wire.VersionMax, MaxFrameLen: wire.MaxFrameLen, Name: "raw"}
	b := hello.AppendTo(make([]byte, wire.HeaderLen))
	wire.Header{Len: uint32(len(b) - wire.HeaderLen), Op: wire.OpHello}.Put(b)
	go peer.Write(b)
	s, err := rpc.New(owner, rpc.Options{Name: "owner", Handler: sv})
	if err != nil {
		t.Fatal(err)
	}
	var hdr [wire.HeaderLen]byte
	if _, err := io.ReadFull(peer, hdr[:]); err != nil {
		t.Fatal(err)
	}
	h, _ := wire.ParseHeader(hdr[:])
	io.CopyN(io.Discard, peer, int64(h.Len))
	go io.Copy(io.Discard, peer)
	t.Cleanup(func() { peer.Close(); s.Close(nil) })
	return s, peer
}

// readOnlyHandler serves dir read-only as the share "s", whatever name a request gives.
func readOnlyHandler(t testing.TB, dir string) *Handler {
	t.Helper()
	sh, err := share.Open("s", dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	return &Handler{Lookup: func(string) (*share.Share, bool) { return sh, true }}
}

// rawFrame encodes one frame.
func rawFrame(h wire.Header, body []byte) []byte {
	b := make([]byte, wire.HeaderLen, wire.HeaderLen+len(body))
	h.Len = uint32(len(body))
	h.Put(b)
	return append(b, body...)
}

// TestJunkFramesOnServedExchangesBounded is the memory attack of a trusted peer: 128 GETs
// that stay open (a window smaller than the file, never more credit), each followed by frames
// a GET does not expect, of 65,525 bytes: just too long for a 64 KiB buffer, so each one takes a
// chunk buffer of 1.125 MiB. The owner must refuse the first of them (CLOSE with PROTOCOL), hold
// no more than memoryBound in frame buffers at any point, and give back every buffer once
// the link is closed.
func TestJunkFramesOnServedExchangesBounded(t *testing.T) {
	dir := t.TempDir()
	big := make([]byte, 3<<20) // window of 2 MiB: the GET waits for credit with a chunk in hand
	if err := os.WriteFile(filepath.Join(dir, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	base := rpc.BuffersHeld()
	s, peer := servePair(t, readOnlyHandler(t, dir))

	const gets, junkPerGet = 128, 250
	var peak int64
	sample := func() {
		if n := rpc.BuffersHeld() - base; n > peak {
			peak = n
		}
	}
	get := wire.GetReq{Share: "s", Path: "big", Window: wire.MinWindow}
	for tag := uint32(1); tag <= gets; tag++ {
		if _, err := peer.Write(rawFrame(wire.Header{Op: wire.OpGet, Tag: tag}, get.AppendTo(nil))); err != nil {
			break
		}
	}
	junk := make([]byte, 65525)
	binary.BigEndian.PutUint32(junk, uint32(wire.EIO))
	for tag := uint32(1); tag <= gets; tag++ {
		var batch []byte
		for range junkPerGet / 10 {
			batch = append(batch, rawFrame(wire.Header{Op: wire.OpEnd, Tag: tag}, junk)...)
		}
		for range 10 {
			if _, err := peer.Write(batch); err != nil {
				tag = gets // the owner closed the link
				break
			}
			sample()
			if peak > memoryBound {
				t.Fatalf("the owner holds %d MiB of frame buffers for one link (bound %d MiB)", peak>>20, memoryBound>>20)
			}
		}
	}
	select {
	case <-s.Done():
		t.Logf("link closed: %v", s.Err())
	case <-time.After(10 * time.Second):
		t.Fatal("the owner kept the link open after frames its exchanges do not expect")
	}
	sample()
	t.Logf("peak frame buffers held: %d MiB", peak>>20)
	deadline := time.Now().Add(10 * time.Second)
	for rpc.BuffersHeld() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := rpc.BuffersHeld() - base; n > 0 {
		t.Fatalf("%d KiB of frame buffers still held after the link closed", n>>10)
	}
}

// TestCreditStarvedGetsBounded: 128 GETs of a large file with the smallest window and never a
// CREDIT. Each GET sends its window and then waits; what it reads ahead meanwhile must come out
// of the link's read-ahead budget, not 4 chunks more per GET (128 × 6 chunk buffers was 864 MiB).
func TestCreditStarvedGetsBounded(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil { // sparse: read as zeros
		t.Fatal(err)
	}
	f.Close()
	base := rpc.BuffersHeld()
	s, peer := servePair(t, readOnlyHandler(t, dir))
	get := wire.GetReq{Share: "s", Path: "big", Window: wire.MinWindow}
	for tag := uint32(1); tag <= 2*rpc.MaxInFlight; tag++ {
		if _, err := peer.Write(rawFrame(wire.Header{Op: wire.OpGet, Tag: tag}, get.AppendTo(nil))); err != nil {
			t.Fatal(err)
		}
	}
	var peak int64
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		peak = max(peak, rpc.BuffersHeld()-base)
		if peak > memoryBound {
			t.Fatalf("128 GETs without credit hold %d MiB of frame buffers (bound %d MiB)", peak>>20, memoryBound>>20)
		}
	}
	t.Logf("peak frame buffers held: %d MiB", peak>>20)
	s.Close(nil)
	deadline := time.Now().Add(10 * time.Second)
	for rpc.BuffersHeld() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := rpc.BuffersHeld() - base; n > 0 {
		t.Fatalf("%d KiB of frame buffers still held after the link closed", n>>10)
	}
}
