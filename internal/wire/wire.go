// Package wire defines the peerfs link protocol: the frame header, the opcodes, the message
// bodies, the limits and the error codes that cross the wire. It is pure encoding and decoding on
// byte slices: it knows no sockets, no files and no sessions. docs/PROTOCOL.md specifies every
// message; TestProtocolDocMatchesOpcodes keeps the two in step.
//
// Byte order is big-endian throughout.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Protocol constants: changing any of these changes the protocol.
const (
	// Magic opens every HELLO so a peer that is not peerfs is refused at once.
	Magic = "PRFS"
	// VersionMin and VersionMax bound the protocol versions this build speaks.
	VersionMin = 4
	VersionMax = 4

	// HeaderLen is the fixed size of a frame header in bytes.
	HeaderLen = 12

	// MaxChunk is the largest bulk payload of one DATA frame (1 MiB): large enough that per-frame
	// costs vanish next to the copy and the cipher, and the FUSE request size (1 MiB) fits in one.
	MaxChunk = 1 << 20
	// MinWindow is the smallest stream credit window: two chunks. A receiver grants credit back
	// in batches of a quarter window, so with one chunk of credit a sender could wait forever
	// for the last quarter; with two, a fully consumed stream always leaves room for a chunk.
	MinWindow = 2 * MaxChunk
	// DataHeaderLen is the part of a DATA payload before the raw bytes: the 8-byte file offset.
	DataHeaderLen = 8
	// MaxFrameLen is the largest payload a receiver accepts, in bytes: one full DATA frame plus
	// room for metadata frames of the same order. A larger length closes the link.
	MaxFrameLen = DataHeaderLen + MaxChunk + 64<<10
	// MaxNameLen is the longest path component in bytes, as on Linux (NAME_MAX).
	MaxNameLen = 255
	// MaxPathLen is the longest relative path in bytes, as on Linux (PATH_MAX).
	MaxPathLen = 4096
	// MaxShareNameLen is the longest share name in bytes.
	MaxShareNameLen = 64
	// MaxMessageLen is the longest free-text message in an ERROR frame.
	MaxMessageLen = 1024
	// HashLen is the length of a content hash (BLAKE3-256).
	HashLen = 32
)

// Flags in the frame header.
type Flags uint8

const (
	// FlagResponse marks a frame sent by the side that did not open the exchange; it selects
	// which tag space the tag belongs to, so both peers can open exchanges independently.
	FlagResponse Flags = 1 << 0
	// FlagMore marks a response frame that is followed by more response frames of the same op.
	FlagMore Flags = 1 << 1

	knownFlags = FlagResponse | FlagMore
)

// Header is a decoded frame header.
//
//	 0               1               2               3
//	+---------------+---------------+---------------+---------------+
//	|                         Length (uint32)                       |
//	+---------------+---------------+---------------+---------------+
//	|   Op (uint8)  | Flags (uint8) |     Reserved (uint16) = 0     |
//	+---------------+---------------+---------------+---------------+
//	|                           Tag (uint32)                        |
//	+---------------+---------------+---------------+---------------+
type Header struct {
	Len   uint32 // payload length after the header
	Op    Op
	Flags Flags
	Tag   uint32
}

// Errors returned by ParseHeader. Each is a protocol violation that closes the link.
var (
	ErrFrameTooLong = errors.New("frame longer than MaxFrameLen")
	ErrReserved     = errors.New("reserved header bits set")
	ErrUnknownFlags = errors.New("unknown header flags")
	ErrShortHeader  = errors.New("short frame header")
)

// Put writes h into b[:HeaderLen].
func (h Header) Put(b []byte) {
	_ = b[HeaderLen-1]
	binary.BigEndian.PutUint32(b[0:4], h.Len)
	b[4] = byte(h.Op)
	b[5] = byte(h.Flags)
	b[6], b[7] = 0, 0
	binary.BigEndian.PutUint32(b[8:12], h.Tag)
}

// ParseHeader decodes and validates a frame header. It does not judge the opcode: an unknown
// opcode is the session's decision (skipped if it is a response, refused if it is a request).
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, ErrShortHeader
	}
	h := Header{
		Len:   binary.BigEndian.Uint32(b[0:4]),
		Op:    Op(b[4]),
		Flags: Flags(b[5]),
		Tag:   binary.BigEndian.Uint32(b[8:12]),
	}
	if b[6] != 0 || b[7] != 0 {
		return h, ErrReserved
	}
	if h.Flags&^knownFlags != 0 {
		return h, fmt.Errorf("%w: %#x", ErrUnknownFlags, uint8(h.Flags))
	}
	if h.Len > MaxFrameLen {
		return h, fmt.Errorf("%w: %d bytes", ErrFrameTooLong, h.Len)
	}
	return h, nil
}

func (h Header) String() string {
	return fmt.Sprintf("%v tag=%d len=%d flags=%#x", h.Op, h.Tag, h.Len, uint8(h.Flags))
}
