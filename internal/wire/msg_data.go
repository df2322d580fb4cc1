package wire

import (
	"encoding/binary"
	"fmt"
)

// ReadReq is the body of READ: one range of a file. The reply payload is the raw bytes, at most
// Length, fewer only at end of file.
type ReadReq struct {
	Share  string
	Path   string
	Offset uint64
	Length uint32 // at most MaxChunk
}

func (m *ReadReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	e.u64(m.Offset)
	e.u32(m.Length)
	return e.b
}

func (m *ReadReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.Offset = d.u64("offset")
	m.Length = d.u32("length")
	if d.err == nil && m.Length > MaxChunk {
		return fmt.Errorf("%w: READ of %d bytes, limit %d", ErrMalformed, m.Length, MaxChunk)
	}
	return d.done("READ")
}

// GetReq is the body of GET: stream a regular file from Offset to its end. The owner answers
// with a GET response (the file's Entry), DATA frames in order while it has credit, and END.
type GetReq struct {
	Share  string
	Path   string
	Offset uint64
	Window uint32 // initial credit in bytes
}

func (m *GetReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	e.u64(m.Offset)
	e.u32(m.Window)
	return e.b
}

func (m *GetReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.Offset = d.u64("offset")
	m.Window = d.u32("window")
	if d.err == nil && m.Window < MinWindow {
		return fmt.Errorf("%w: GET window of %d bytes, minimum %d", ErrMalformed, m.Window, MinWindow)
	}
	return d.done("GET")
}

// StreamReq is the body of STREAM: push [Offset, Offset+Length) of a regular file, or up to
// its end if that comes first. The owner answers with the file's Entry, DATA frames of at most
// MaxChunk bytes in order while it has credit, and END carrying the file's size (8 bytes).
// Unlike GET there is no hash: a mount reading ahead of a sequential reader uses it, and the
// mount trusts the link, not a digest, as it does for READ.
type StreamReq struct {
	Share  string
	Path   string
	Offset uint64
	Length uint64
	Window uint32 // initial credit in bytes
}

func (m *StreamReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	e.u64(m.Offset)
	e.u64(m.Length)
	e.u32(m.Window)
	return e.b
}

func (m *StreamReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.Offset = d.u64("offset")
	m.Length = d.u64("length")
	m.Window = d.u32("window")
	if d.err == nil && m.Window < MinWindow {
		return fmt.Errorf("%w: STREAM window of %d bytes, minimum %d", ErrMalformed, m.Window, MinWindow)
	}
	return d.done("STREAM")
}

// StreamEnd is the body of END in GET and PUT: the total size and the BLAKE3-256 hash of the
// whole file, from byte 0, whatever offset the stream started at.
type StreamEnd struct {
	Size uint64
	Hash [HashLen]byte
}

const StreamEndLen = 8 + HashLen

func (m *StreamEnd) AppendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, m.Size)
	return append(b, m.Hash[:]...)
}

func (m *StreamEnd) Decode(b []byte) error {
	if len(b) != StreamEndLen {
		return fmt.Errorf("%w: END is %d bytes, want %d", ErrMalformed, len(b), StreamEndLen)
	}
	m.Size = binary.BigEndian.Uint64(b)
	copy(m.Hash[:], b[8:])
	return nil
}

// PutReq is the body of PUT: upload a regular file to Path. The owner writes it under a
// temporary name and renames it into place only after END's hash matches what it received.
type PutReq struct {
	Share   string
	Path    string
	Size    uint64
	Mode    uint32 // permission bits
	MtimeNs int64
	Flags   uint32
}

// PutReq flags.
const (
	// PutResume asks the owner to keep a partial upload of the same path and report its length.
	PutResume uint32 = 1 << 0
	putKnown         = PutResume
)

func (m *PutReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	e.u64(m.Size)
	e.u32(m.Mode)
	e.i64(m.MtimeNs)
	e.u32(m.Flags)
	return e.b
}

func (m *PutReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.Size = d.u64("size")
	m.Mode = d.u32("mode")
	m.MtimeNs = d.i64("mtime")
	m.Flags = d.u32("flags")
	if d.err == nil && m.Path == "" {
		return fmt.Errorf("%w: PUT to the share root", ErrMalformed)
	}
	if d.err == nil && m.Flags&^putKnown != 0 {
		return fmt.Errorf("%w: unknown PUT flags %#x", ErrMalformed, m.Flags)
	}
	return d.done("PUT")
}

// PutResp is the owner's first reply to PUT: where the uploader starts and its initial credit.
type PutResp struct {
	Offset uint64
	Window uint32
}

const PutRespLen = 12

func (m *PutResp) AppendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, m.Offset)
	return binary.BigEndian.AppendUint32(b, m.Window)
}

func (m *PutResp) Decode(b []byte) error {
	if len(b) != PutRespLen {
		return fmt.Errorf("%w: PUT response is %d bytes, want %d", ErrMalformed, len(b), PutRespLen)
	}
	m.Offset = binary.BigEndian.Uint64(b)
	m.Window = binary.BigEndian.Uint32(b[8:])
	return nil
}

// DataOffset returns the file offset of a DATA payload and the raw bytes after it.
func DataOffset(payload []byte) (uint64, []byte, error) {
	if len(payload) < DataHeaderLen {
		return 0, nil, fmt.Errorf("%w: DATA of %d bytes", ErrMalformed, len(payload))
	}
	return binary.BigEndian.Uint64(payload), payload[DataHeaderLen:], nil
}

// PutDataOffset writes the offset of a DATA payload in place.
func PutDataOffset(payload []byte, off uint64) { binary.BigEndian.PutUint64(payload, off) }
