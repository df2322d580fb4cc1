package wire

import "fmt"

// POSIX file type bits of Entry.Mode, fixed here so that peers on any system agree.
const (
	ModeTypeMask = 0o170000
	ModeDir      = 0o040000
	ModeRegular  = 0o100000
	ModeSymlink  = 0o120000
	ModeFIFO     = 0o010000
	ModeSocket   = 0o140000
	ModeChar     = 0o020000
	ModeBlock    = 0o060000
	ModePermMask = 0o7777
)

// Entry is one file's attributes as the owner sees them. In READDIR replies Name is the base
// name; in STAT and GET replies it is empty.
type Entry struct {
	Name    string
	Mode    uint32 // type bits (ModeDir, ...) | permission bits
	Size    uint64
	MtimeNs int64
	AtimeNs int64
	CtimeNs int64
	Ino     uint64
	Nlink   uint32
	UID     uint32
	GID     uint32
	Target  string // symlink target, verbatim; empty for other types
	Rdev    uint64 // device number of a character or block device (Linux encoding); 0 otherwise
	// Data is the whole content of a small regular file, inlined in READDIR replies when the
	// request asked for it (ReadDirReq.InlineMax), so opening it costs no round trip. Empty
	// otherwise; HasData tells an inlined empty file from no data.
	Data    []byte
	HasData bool
}

func (m *Entry) IsDir() bool     { return m.Mode&ModeTypeMask == ModeDir }
func (m *Entry) IsRegular() bool { return m.Mode&ModeTypeMask == ModeRegular }
func (m *Entry) IsSymlink() bool { return m.Mode&ModeTypeMask == ModeSymlink }
func (m *Entry) isDevice() bool {
	t := m.Mode & ModeTypeMask
	return t == ModeChar || t == ModeBlock
}

func (m *Entry) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Name)
	e.u32(m.Mode)
	e.u64(m.Size)
	e.i64(m.MtimeNs)
	e.i64(m.AtimeNs)
	e.i64(m.CtimeNs)
	e.u64(m.Ino)
	e.u32(m.Nlink)
	e.u32(m.UID)
	e.u32(m.GID)
	e.str(m.Target)
	if m.isDevice() {
		e.u64(m.Rdev) // only devices carry it: listings stay as small as before
	}
	if m.HasData {
		e.u8(1)
		e.bytes(m.Data)
	} else {
		e.u8(0)
	}
	return e.b
}

func (m *Entry) decode(d *decoder) {
	m.Name = d.str("name", MaxNameLen)
	m.Mode = d.u32("mode")
	m.Size = d.u64("size")
	m.MtimeNs = d.i64("mtime")
	m.AtimeNs = d.i64("atime")
	m.CtimeNs = d.i64("ctime")
	m.Ino = d.u64("ino")
	m.Nlink = d.u32("nlink")
	m.UID = d.u32("uid")
	m.GID = d.u32("gid")
	m.Target = d.str("target", MaxPathLen)
	m.Rdev = 0
	if m.isDevice() {
		m.Rdev = d.u64("rdev")
	}
	switch d.u8("inline flag") {
	case 0:
	case 1:
		m.HasData = true
		m.Data = d.bytes("inline data", MaxInline)
		if m.isDevice() {
			d.fail("inline data of a device") // it has no contents; MaxEntryLen counts on it
		}
	default:
		d.fail("inline flag")
	}
	if d.err == nil && m.Name != "" {
		if err := CheckPath(m.Name); err != nil || len(m.Name) != len(firstComponent(m.Name)) {
			d.fail("entry name")
		}
	}
}

func firstComponent(p string) string {
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return p
}

func (m *Entry) Decode(b []byte) error {
	d := decoder{b: b}
	m.decode(&d)
	return d.done("entry")
}

// PathReq is the body of STAT, UNLINK, RMDIR and LISTXATTR: a path inside a share.
type PathReq struct {
	Share string
	Path  string
}

func (m *PathReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	return e.b
}

func (m *PathReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	return d.done("path request")
}

// ReadDirReq is the body of READDIR: a directory, and the size up to which regular files'
// contents are inlined in the reply (0: none; at most MaxInline).
type ReadDirReq struct {
	Share     string
	Path      string
	InlineMax uint32
}

func (m *ReadDirReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	e.u32(m.InlineMax)
	return e.b
}

func (m *ReadDirReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.InlineMax = d.u32("inline max")
	if d.err == nil && m.InlineMax > MaxInline {
		return fmt.Errorf("%w: READDIR inline limit %d above %d", ErrMalformed, m.InlineMax, MaxInline)
	}
	return d.done("READDIR")
}

// ListReq is the body of LIST: READDIR's request and the opener's initial credit, in bytes
// of reply payload (at least MinWindow).
type ListReq struct {
	ReadDirReq
	Window uint32
}

func (m *ListReq) AppendTo(b []byte) []byte {
	b = m.ReadDirReq.AppendTo(b)
	e := encoder{b}
	e.u32(m.Window)
	return e.b
}

func (m *ListReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.InlineMax = d.u32("inline max")
	m.Window = d.u32("window")
	switch {
	case d.err != nil:
	case m.InlineMax > MaxInline:
		return fmt.Errorf("%w: LIST inline limit %d above %d", ErrMalformed, m.InlineMax, MaxInline)
	case m.Window < MinWindow:
		return fmt.Errorf("%w: LIST window %d below %d", ErrMalformed, m.Window, MinWindow)
	}
	return d.done("LIST")
}

// Entries is the body of one READDIR response frame: a batch of entries. A directory larger
// than one frame is answered by several frames, all but the last with FlagMore.
type Entries struct{ List []Entry }

// minEntryLen is the encoded size of an Entry with empty strings and no inline data.
const minEntryLen = 2 + 4 + 8 + 8*3 + 8 + 4*3 + 2 + 1

// MaxInline is the largest file content a READDIR reply may inline per entry (64 KiB).
const MaxInline = 64 << 10

// MaxEntryLen bounds the encoded size of one Entry, so senders can cut batches below MaxFrameLen.
const MaxEntryLen = 2 + MaxNameLen + 4 + 8*5 + 4*3 + 2 + MaxPathLen + 1 + 4 + MaxInline

func (m *Entries) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.u32(uint32(len(m.List)))
	for i := range m.List {
		e.b = m.List[i].AppendTo(e.b)
	}
	return e.b
}

func (m *Entries) Decode(b []byte) error {
	d := decoder{b: b}
	n := d.u32("count")
	// Refuse counts the payload cannot hold before allocating.
	if d.err == nil && uint64(n)*minEntryLen > uint64(len(d.b)) {
		d.fail("entry count")
	}
	if d.err != nil {
		return d.err
	}
	m.List = make([]Entry, 0, n)
	for i := uint32(0); i < n && d.err == nil; i++ {
		var en Entry
		en.decode(&d)
		m.List = append(m.List, en)
	}
	return d.done("READDIR")
}

// ShareInfo describes one share in a SHARES reply.
type ShareInfo struct {
	Name     string
	ReadOnly bool
}

// shareReadOnly is the only ShareInfo flag bit.
const shareReadOnly = 1

// Shares is the body of a SHARES reply.
type Shares struct{ List []ShareInfo }

func (m *Shares) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.u16(uint16(len(m.List)))
	for _, s := range m.List {
		e.str(s.Name)
		var flags uint8
		if s.ReadOnly {
			flags |= shareReadOnly
		}
		e.u8(flags)
	}
	return e.b
}

func (m *Shares) Decode(b []byte) error {
	d := decoder{b: b}
	n := d.u16("count")
	if d.err == nil && int(n)*4 > len(d.b) {
		d.fail("share count")
	}
	if d.err != nil {
		return d.err
	}
	m.List = make([]ShareInfo, 0, n)
	for i := uint16(0); i < n && d.err == nil; i++ {
		s := ShareInfo{Name: d.share()}
		flags := d.u8("flags")
		if d.err == nil && flags&^shareReadOnly != 0 {
			return fmt.Errorf("%w: unknown share flags %#x", ErrMalformed, flags)
		}
		s.ReadOnly = flags&shareReadOnly != 0
		m.List = append(m.List, s)
	}
	return d.done("SHARES")
}
