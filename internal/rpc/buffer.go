package rpc

import (
	"sync"

	"github.com/peerfs/peerfs/internal/directio"
	"github.com/peerfs/peerfs/internal/wire"
)

// Buffer is a pooled frame buffer. B[:wire.HeaderLen] is room for the frame header so a frame
// leaves in one Write; the payload follows. Whoever holds a Buffer releases it exactly once with
// Release, after which B must not be touched.
type Buffer struct {
	B     []byte // header room + payload; len is the frame length
	class int8
	// raw is the allocation B is cut from, for the largest class, whose B starts at raw[start]
	// unless GetTailAligned moved it.
	raw   []byte
	start int
}

// Payload returns the bytes after the header room.
func (b *Buffer) Payload() []byte { return b.B[wire.HeaderLen:] }

// Size classes, by total frame length: control frames, metadata batches, full DATA chunks.
var classSizes = [...]int{4 << 10, 64 << 10, wire.HeaderLen + wire.MaxFrameLen}

var pools [len(classSizes)]sync.Pool

func init() {
	for i := range pools {
		size := classSizes[i]
		pools[i].New = func() any { return &Buffer{B: make([]byte, size)} }
	}
	// The raw bytes of a full DATA frame start on a page boundary, so files can be read into
	// and written from them with O_DIRECT (internal/directio).
	last := len(pools) - 1
	pools[last].New = func() any {
		size := classSizes[last]
		raw := make([]byte, size+directio.Align)
		o := directio.Start(raw, wire.HeaderLen+wire.DataHeaderLen)
		return &Buffer{B: raw[o : o+size : o+size], raw: raw, start: o}
	}
}

// GetBuffer returns a buffer with room for a header and payloadLen bytes of payload.
// payloadLen must not exceed wire.MaxFrameLen.
func GetBuffer(payloadLen int) *Buffer {
	n := wire.HeaderLen + payloadLen
	for i, size := range classSizes {
		if n <= size {
			b := pools[i].Get().(*Buffer)
			b.class = int8(i)
			b.B = b.B[:n]
			return b
		}
	}
	panic("rpc: buffer larger than MaxFrameLen")
}

// GetTailAligned is GetBuffer for a frame whose payload ends with bulk bytes after a head of
// variable length (a WRITE): the frame ends on a page boundary, so bulk bytes of a whole
// number of pages start on one too, and the owner writes them with O_DIRECT without first
// copying them into an aligned buffer. Frames too small for the largest class are not moved.
func GetTailAligned(payloadLen int) *Buffer {
	b := GetBuffer(payloadLen)
	if b.raw != nil {
		n := len(b.B)
		o := directio.Start(b.raw, n) // raw[o+n] is on a page boundary; o+n <= len(raw)
		b.B = b.raw[o : o+n : o+n]
	}
	return b
}

// Release returns b to its pool. It is safe on nil.
func (b *Buffer) Release() {
	if b == nil {
		return
	}
	if b.raw != nil {
		size := classSizes[len(classSizes)-1]
		b.B = b.raw[b.start : b.start+size : b.start+size]
	} else {
		b.B = b.B[:cap(b.B)]
	}
	pools[b.class].Put(b)
}
