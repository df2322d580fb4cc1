package wire

import "fmt"

// MkdirReq is the body of MKDIR. Without NameExclusive an existing directory is success, so
// trees can be sent again.
type MkdirReq struct {
	Share string
	Path  string
	Mode  uint32 // permission bits
	Flags uint32 // NameExclusive
}

// MKDIR and SYMLINK flags.
const (
	// NameExclusive makes a name that exists on the owner an error (EEXIST), as mkdir(2) and
	// symlink(2) do; without it an existing directory (MKDIR) is success and an existing
	// link (SYMLINK) is replaced, so that a tree can be sent again. A mount always sets it:
	// its replica may not know yet of a name another device just created.
	NameExclusive uint32 = 1 << 0
	nameKnown            = NameExclusive
)

func (m *MkdirReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	e.u32(m.Mode)
	e.u32(m.Flags)
	return e.b
}

func (m *MkdirReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.Mode = d.u32("mode")
	m.Flags = d.u32("flags")
	if d.err == nil && m.Path == "" {
		return fmt.Errorf("%w: MKDIR of the share root", ErrMalformed)
	}
	if d.err == nil && m.Flags&^nameKnown != 0 {
		return fmt.Errorf("%w: MKDIR with unknown flags %#x", ErrMalformed, m.Flags&^nameKnown)
	}
	return d.done("MKDIR")
}

// SymlinkReq is the body of SYMLINK: create Path as a link to Target. Without NameExclusive an
// existing link is replaced.
type SymlinkReq struct {
	Share  string
	Path   string
	Target string
	Flags  uint32 // NameExclusive
}

func (m *SymlinkReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	e.str(m.Target)
	e.u32(m.Flags)
	return e.b
}

func (m *SymlinkReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.Target = d.str("target", MaxPathLen)
	m.Flags = d.u32("flags")
	if d.err == nil && (m.Path == "" || m.Target == "") {
		return fmt.Errorf("%w: SYMLINK needs a path and a target", ErrMalformed)
	}
	if d.err == nil && m.Flags&^nameKnown != 0 {
		return fmt.Errorf("%w: SYMLINK with unknown flags %#x", ErrMalformed, m.Flags&^nameKnown)
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
	UID     uint32 // owner's user ID to set, as the owner numbers users (SetUID)
	GID     uint32 // owner's group ID to set (SetGID)
}

// SetAttrReq.Valid bits.
const (
	SetMode  uint32 = 1 << 0
	SetMtime uint32 = 1 << 1
	SetAtime uint32 = 1 << 2
	SetSize  uint32 = 1 << 3
	SetUID   uint32 = 1 << 4 // chown: the owner's user ID (version 4)
	SetGID   uint32 = 1 << 5 // chown: the owner's group ID (version 4)
	setKnown        = SetMode | SetMtime | SetAtime | SetSize | SetUID | SetGID
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
	e.u32(m.UID)
	e.u32(m.GID)
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
	m.UID = d.u32("uid")
	m.GID = d.u32("gid")
	if d.err == nil && m.Valid&^setKnown != 0 {
		return fmt.Errorf("%w: unknown SETATTR bits %#x", ErrMalformed, m.Valid)
	}
	return d.done("SETATTR")
}
