package wire

import "fmt"

// MkdirReq is the body of MKDIR. An existing directory is success, so trees can be re-sent.
type MkdirReq struct {
	Share string
	Path  string
	Mode  uint32 // permission bits
}

func (m *MkdirReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	e.u32(m.Mode)
	return e.b
}

func (m *MkdirReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.Mode = d.u32("mode")
	if d.err == nil && m.Path == "" {
		return fmt.Errorf("%w: MKDIR of the share root", ErrMalformed)
	}
	return d.done("MKDIR")
}

// SymlinkReq is the body of SYMLINK: create Path as a link to Target, replacing an existing link.
type SymlinkReq struct {
	Share  string
	Path   string
	Target string
}

func (m *SymlinkReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	e.str(m.Target)
	return e.b
}

func (m *SymlinkReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.Target = d.str("target", MaxPathLen)
	if d.err == nil && (m.Path == "" || m.Target == "") {
		return fmt.Errorf("%w: SYMLINK needs a path and a target", ErrMalformed)
	}
	return d.done("SYMLINK")
}

// SetAttrReq is the body of SETATTR. Valid says which fields apply. The reply is the Entry
// after the change.
type SetAttrReq struct {
	Share   string
	Path    string
	Valid   uint32
	Mode    uint32 // permission bits
	MtimeNs int64
	AtimeNs int64
	Size    uint64 // truncate or extend to this length
}

// SetAttrReq.Valid bits.
const (
	SetMode  uint32 = 1 << 0
	SetMtime uint32 = 1 << 1
	SetAtime uint32 = 1 << 2
	SetSize  uint32 = 1 << 3
	setKnown        = SetMode | SetMtime | SetAtime | SetSize
)

func (m *SetAttrReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	e.u32(m.Valid)
	e.u32(m.Mode)
	e.i64(m.MtimeNs)
	e.i64(m.AtimeNs)
	e.u64(m.Size)
	return e.b
}

func (m *SetAttrReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.Valid = d.u32("valid")
	m.Mode = d.u32("mode")
	m.MtimeNs = d.i64("mtime")
	m.AtimeNs = d.i64("atime")
	m.Size = d.u64("size")
	if d.err == nil && m.Valid&^setKnown != 0 {
		return fmt.Errorf("%w: unknown SETATTR bits %#x", ErrMalformed, m.Valid)
	}
	return d.done("SETATTR")
}
