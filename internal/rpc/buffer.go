package rpc

import (
	"sync"
	"sync/atomic"

	"github.com/peerfs/peerfs/internal/chunkbuf"
	"github.com/peerfs/peerfs/internal/wire"
)

// Buffer is a pooled frame buffer. B[:wire.HeaderLen] is room for the frame header so a frame
// leaves in one Write; the payload follows. Whoever holds a Buffer releases it exactly once with
// Release, after which B must not be touched.
type Buffer struct {
	B     []byte // header room + payload; len is the frame length
	class int8
	// raw is the chunk buffer (chunkbuf.Get) B is cut from, in the largest class.
	raw []byte
	// budget is the pushed stream whose read-ahead this chunk counts in (OutStream.GetChunk).
	budget *chunkBudget
	// served is the session whose peer sent this frame on an exchange it opened: the frame
	// counts in that session's MaxServedBytes until released, wherever it is by then.
	served *Session
}

// Payload returns the bytes after the header room.
func (b *Buffer) Payload() []byte { return b.B[wire.HeaderLen:] }

// Size classes, by total frame length: control frames, small metadata, READDIR and EVENTS
// batches (cut at 256 KiB plus one entry), full DATA chunks. A frame occupies the whole buffer
// of its class, which is what the queue limits count (Cap).
var classSizes = [...]int{4 << 10, 64 << 10, 512 << 10, wire.HeaderLen + wire.MaxFrameLen}

const chunkClass = len(classSizes) - 1

// pools keep the buffers of the small classes; chunkFrames keeps Buffers of the largest class
// without their memory, which goes back to chunkbuf's arena (huge pages, for O_DIRECT)
// at each Release.
var (
	pools       [chunkClass]sync.Pool
	chunkFrames = sync.Pool{New: func() any { return &Buffer{class: int8(chunkClass)} }}
)

func init() {
	for i := range pools {
		size := classSizes[i]
		pools[i].New = func() any { return &Buffer{B: make([]byte, size), class: int8(i)} }
	}
	if classSizes[chunkClass]+chunkbuf.PageSize > chunkbuf.Len {
		panic("rpc: the largest frame does not fit a chunk buffer")
	}
}

// held is the memory of the Buffers handed out and not yet released, by Cap.
var held atomic.Int64

// BuffersHeld returns the memory, in bytes, of the frame buffers in use in the process: the
// frames queued on exchanges, requests being served, chunks being read or sent. Pooled buffers
// not in use are not counted.
func BuffersHeld() int64 { return held.Load() }

// Cap returns the memory b occupies: its whole size class, whatever the frame's length (a
// frame of 65,525 bytes takes a chunk buffer of chunkbuf.Len).
func (b *Buffer) Cap() int {
	if int(b.class) == chunkClass {
		return chunkbuf.Len
	}
	return classSizes[b.class]
}

// GetBuffer returns a buffer with room for a header and payloadLen bytes of payload.
// payloadLen must not exceed wire.MaxFrameLen. The raw bytes of a full DATA frame start on a
// page boundary, so files can be read into and written from them with O_DIRECT.
func GetBuffer(payloadLen int) *Buffer {
	n := wire.HeaderLen + payloadLen
	for i, size := range classSizes[:chunkClass] {
		if n <= size {
			b := pools[i].Get().(*Buffer)
			b.B = b.B[:n]
			held.Add(int64(size))
			return b
		}
	}
	if n > classSizes[chunkClass] {
		panic("rpc: buffer larger than MaxFrameLen")
	}
	b := chunkFrames.Get().(*Buffer)
	held.Add(chunkbuf.Len)
	b.raw = chunkbuf.Get()
	o := chunkbuf.Start(b.raw, wire.HeaderLen+wire.DataHeaderLen)
	b.B = b.raw[o : o+n : o+classSizes[chunkClass]]
	return b
}

// GetTailAligned is GetBuffer for a frame whose payload ends with bulk bytes after a head of
// variable length (a WRITE): the frame ends on a page boundary, so bulk bytes of a whole
// number of pages start on one too, and the owner writes them with O_DIRECT without first
// copying them into an aligned buffer. Frames too small for the largest class are not moved.
func GetTailAligned(payloadLen int) *Buffer {
	b := GetBuffer(payloadLen)
	if b.raw != nil {
		n := len(b.B)
		o := chunkbuf.Start(b.raw, n) // raw[o+n] is on a page boundary; o+n < len(raw)
		b.B = b.raw[o : o+n : o+n]
	}
	return b
}

// Release returns b to its pool. It is safe on nil.
func (b *Buffer) Release() {
	if b == nil {
		return
	}
	held.Add(-int64(b.Cap()))
	if b.budget != nil {
		b.budget.put()
		b.budget = nil
	}
	if b.served != nil {
		b.served.releaseServed(b.Cap())
		b.served = nil
	}
	if b.raw != nil {
		chunkbuf.Put(b.raw)
		b.raw, b.B = nil, nil
		chunkFrames.Put(b)
		return
	}
	b.B = b.B[:cap(b.B)]
	pools[b.class].Put(b)
}
