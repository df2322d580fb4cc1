package wire

import (
	"encoding/binary"
	"fmt"
)

// Messages of the mount: namespace changes, writes, extended attributes, capacity and change
// events. Each change request is answered with the affected Entry (or an empty reply where
// the message says so) or an ERROR carrying the owner's errno.

// CreateReq is the body of CREATE: create a regular file (or open an existing one unless
// Exclusive) and reply with its Entry.
type CreateReq struct {
	Share string
	Path  string
	Mode  uint32 // permission bits
	Flags uint32
	// With CreateWithData, the file's first contents: Data written at Offset once the file
	// exists, as one WRITE would (a mount that created the file locally sends its creation
	// and first piece of data in one request).
	Offset uint64
	Data   []byte
	// With CreateSetTimes, the atime and mtime the file gets once created (and written): a
	// mount that showed a file it created locally with its own times keeps them true.
	AtimeNs, MtimeNs int64
}

// CreateReq flags.
const (
	CreateExclusive uint32 = 1 << 0 // fail with EEXIST if the name exists (O_EXCL)
	CreateTruncate  uint32 = 1 << 1 // truncate an existing file to zero (O_TRUNC)
	CreateWithData  uint32 = 1 << 2 // Offset and Data follow
	CreateSetTimes  uint32 = 1 << 3 // AtimeNs and MtimeNs follow
	createKnown            = CreateExclusive | CreateTruncate | CreateWithData | CreateSetTimes
)

func (m *CreateReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	e.u32(m.Mode)
	e.u32(m.Flags)
	if m.Flags&CreateWithData != 0 {
		e.u64(m.Offset)
		e.bytes(m.Data)
	}
	if m.Flags&CreateSetTimes != 0 {
		e.i64(m.AtimeNs)
		e.i64(m.MtimeNs)
	}
	return e.b
}

func (m *CreateReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.Mode = d.u32("mode")
	m.Flags = d.u32("flags")
	if d.err == nil && (m.Path == "" || m.Flags&^createKnown != 0) {
		return fmt.Errorf("%w: CREATE needs a path and known flags", ErrMalformed)
	}
	m.Offset, m.Data, m.AtimeNs, m.MtimeNs = 0, nil, 0, 0
	if m.Flags&CreateWithData != 0 {
		m.Offset = d.u64("offset")
		m.Data = d.bytes("data", MaxChunk)
	}
	if m.Flags&CreateSetTimes != 0 {
		m.AtimeNs = d.i64("atime")
		m.MtimeNs = d.i64("mtime")
	}
	return d.done("CREATE")
}

// WriteReq is the head of a WRITE body; the raw bytes to write follow it directly, up to the
// end of the frame (at most MaxChunk). The reply is the file's Entry after the write.
type WriteReq struct {
	Share  string
	Path   string
	Offset uint64
}

// AppendTo appends the head; the caller appends the data.
func (m *WriteReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	e.u64(m.Offset)
	return e.b
}

// Decode parses the head and returns the data that follows, aliasing b.
func (m *WriteReq) Decode(b []byte) ([]byte, error) {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.Offset = d.u64("offset")
	if d.err != nil {
		return nil, d.err
	}
	if m.Path == "" || len(d.b) > MaxChunk {
		return nil, fmt.Errorf("%w: WRITE needs a path and at most %d bytes", ErrMalformed, MaxChunk)
	}
	return d.b, nil
}

// ChangeResp is the reply to WRITE and SETATTR: the file's Entry after the change, and its
// size, mtime and ctime just before it, as the owner saw them. A mount that caches the file
// compares them with what it last knew: if they differ from that and from its own earlier
// changes' results, someone else changed the file (NFS's weak cache consistency), and its
// cached pages must go; if they match, what it caches stays true (a chmod or utime leaves the
// contents as they were).
type ChangeResp struct {
	Entry Entry
	Pre   FileState
}

// FileState is what tells two states of a file's contents apart: with the multigrain
// timestamps of Linux 6.13 and later, a change after anyone looked gets a ctime of its own.
type FileState struct {
	Size    uint64
	MtimeNs int64
	CtimeNs int64
}

// State returns the FileState part of an Entry.
func (m *Entry) State() FileState { return FileState{m.Size, m.MtimeNs, m.CtimeNs} }

func (m *ChangeResp) AppendTo(b []byte) []byte {
	e := encoder{m.Entry.AppendTo(b)}
	e.u64(m.Pre.Size)
	e.i64(m.Pre.MtimeNs)
	e.i64(m.Pre.CtimeNs)
	return e.b
}

func (m *ChangeResp) Decode(b []byte) error {
	d := decoder{b: b}
	m.Entry.decode(&d)
	m.Pre.Size = d.u64("size before")
	m.Pre.MtimeNs = d.i64("mtime before")
	m.Pre.CtimeNs = d.i64("ctime before")
	return d.done("WRITE reply")
}

// RenameReq is the body of RENAME.
type RenameReq struct {
	Share string
	From  string
	To    string
	Flags uint32
}

// RenameReq flags, as Linux renameat2.
const (
	RenameNoReplace uint32 = 1 << 0
	RenameExchange  uint32 = 1 << 1
	renameKnown            = RenameNoReplace | RenameExchange
)

func (m *RenameReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.From)
	e.str(m.To)
	e.u32(m.Flags)
	return e.b
}

func (m *RenameReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.From = d.path("from")
	m.To = d.path("to")
	m.Flags = d.u32("flags")
	if d.err == nil && (m.From == "" || m.To == "" || m.Flags&^renameKnown != 0 || m.Flags == renameKnown) {
		return fmt.Errorf("%w: RENAME needs two paths and at most one known flag", ErrMalformed)
	}
	return d.done("RENAME")
}

// LinkReq is the body of LINK: make To a new hard link to the existing From. The reply is
// the Entry of To.
type LinkReq struct {
	Share string
	From  string
	To    string
}

func (m *LinkReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.From)
	e.str(m.To)
	return e.b
}

func (m *LinkReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.From = d.path("from")
	m.To = d.path("to")
	if d.err == nil && (m.From == "" || m.To == "") {
		return fmt.Errorf("%w: LINK needs two paths", ErrMalformed)
	}
	return d.done("LINK")
}

// MaxXattrName and MaxXattrValue are Linux's limits (XATTR_NAME_MAX, XATTR_SIZE_MAX).
const (
	MaxXattrName  = 255
	MaxXattrValue = 64 << 10
)

// XattrReq is the body of GETXATTR, SETXATTR and REMOVEXATTR. Only the "user." namespace is
// served. GETXATTR replies with the raw value.
type XattrReq struct {
	Share string
	Path  string
	Name  string
	Value []byte // SETXATTR only
	Flags uint32 // SETXATTR only: XattrCreate or XattrReplace
}

// SETXATTR flags, as Linux setxattr.
const (
	XattrCreate  uint32 = 1
	XattrReplace uint32 = 2
)

func (m *XattrReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	e.str(m.Name)
	e.bytes(m.Value)
	e.u32(m.Flags)
	return e.b
}

func (m *XattrReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.Name = d.str("name", MaxXattrName)
	m.Value = d.bytes("value", MaxXattrValue)
	m.Flags = d.u32("flags")
	if d.err == nil && (m.Name == "" || m.Flags > XattrReplace) {
		return fmt.Errorf("%w: xattr request needs a name and known flags", ErrMalformed)
	}
	return d.done("XATTR")
}

// XattrNames is the reply of LISTXATTR.
type XattrNames struct{ Names []string }

func (m *XattrNames) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.u16(uint16(len(m.Names)))
	for _, n := range m.Names {
		e.str(n)
	}
	return e.b
}

func (m *XattrNames) Decode(b []byte) error {
	d := decoder{b: b}
	n := d.u16("count")
	if d.err == nil && int(n)*3 > len(d.b) {
		d.fail("xattr count")
	}
	if d.err != nil {
		return d.err
	}
	m.Names = make([]string, 0, n)
	for i := uint16(0); i < n && d.err == nil; i++ {
		name := d.str("name", MaxXattrName)
		// No attribute has an empty name; refusing one also keeps the count guard above (three
		// bytes per name) exact.
		if d.err == nil && name == "" {
			return fmt.Errorf("%w: empty name in LISTXATTR reply", ErrMalformed)
		}
		m.Names = append(m.Names, name)
	}
	return d.done("LISTXATTR")
}

// FallocateReq is the body of FALLOCATE (Linux fallocate modes). The reply is the Entry.
type FallocateReq struct {
	Share  string
	Path   string
	Mode   uint32
	Offset uint64
	Length uint64
}

func (m *FallocateReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	e.u32(m.Mode)
	e.u64(m.Offset)
	e.u64(m.Length)
	return e.b
}

func (m *FallocateReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.Mode = d.u32("mode")
	m.Offset = d.u64("offset")
	m.Length = d.u64("length")
	return d.done("FALLOCATE")
}

// MknodReq is the body of MKNOD: make a FIFO, a socket or a device node at a free name,
// as mknod(2) does (the owner's umask applies). The reply is the new Entry.
type MknodReq struct {
	Share string
	Path  string
	Mode  uint32 // file type bits (ModeFIFO, ModeSocket, ModeChar, ModeBlock) | permission bits
	Rdev  uint64 // device number of a device node, Linux encoding; 0 otherwise
}

func (m *MknodReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	e.u32(m.Mode)
	e.u64(m.Rdev)
	return e.b
}

func (m *MknodReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	m.Mode = d.u32("mode")
	m.Rdev = d.u64("rdev")
	if d.err == nil && m.Path == "" {
		return fmt.Errorf("%w: MKNOD needs a path", ErrMalformed)
	}
	switch m.Mode & ModeTypeMask {
	case ModeFIFO, ModeSocket, ModeChar, ModeBlock:
	default:
		if d.err == nil {
			return fmt.Errorf("%w: MKNOD of file type %#o", ErrMalformed, m.Mode&ModeTypeMask)
		}
	}
	if d.err == nil && m.Mode&^(ModeTypeMask|ModePermMask) != 0 {
		return fmt.Errorf("%w: MKNOD mode %#o", ErrMalformed, m.Mode)
	}
	return d.done("MKNOD")
}

// FsyncReq is the body of FSYNC: flush a file (or, with an empty path, nothing but the
// share's filesystem metadata) to stable storage on the owner. Empty reply.
type FsyncReq struct {
	Share    string
	Path     string
	DataOnly bool
}

func (m *FsyncReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	e.str(m.Path)
	var f uint8
	if m.DataOnly {
		f = 1
	}
	e.u8(f)
	return e.b
}

func (m *FsyncReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	m.Path = d.path("path")
	f := d.u8("flags")
	if d.err == nil && f > 1 {
		return fmt.Errorf("%w: unknown FSYNC flags %#x", ErrMalformed, f)
	}
	m.DataOnly = f == 1
	return d.done("FSYNC")
}

// Statfs is the reply of STATFS: the owner's filesystem as statfs(2) reports it.
type Statfs struct {
	Bsize, Blocks, Bfree, Bavail, Files, Ffree uint64
	NameLen                                    uint32
}

const StatfsLen = 6*8 + 4

func (m *Statfs) AppendTo(b []byte) []byte {
	for _, v := range []uint64{m.Bsize, m.Blocks, m.Bfree, m.Bavail, m.Files, m.Ffree} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return binary.BigEndian.AppendUint32(b, m.NameLen)
}

func (m *Statfs) Decode(b []byte) error {
	if len(b) != StatfsLen {
		return fmt.Errorf("%w: STATFS reply is %d bytes, want %d", ErrMalformed, len(b), StatfsLen)
	}
	v := func(i int) uint64 { return binary.BigEndian.Uint64(b[8*i:]) }
	m.Bsize, m.Blocks, m.Bfree, m.Bavail, m.Files, m.Ffree = v(0), v(1), v(2), v(3), v(4), v(5)
	m.NameLen = binary.BigEndian.Uint32(b[48:])
	return nil
}

// ShareReq is the body of STATFS and WATCH: a share.
type ShareReq struct{ Share string }

func (m *ShareReq) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.str(m.Share)
	return e.b
}

func (m *ShareReq) Decode(b []byte) error {
	d := decoder{b: b}
	m.Share = d.share()
	return d.done("share request")
}

// Event kinds: what changed at a path.
const (
	EventChanged uint8 = 1 // content or attributes changed; the entry may be new
	EventRemoved uint8 = 2 // the path no longer exists
	EventRescan  uint8 = 3 // too many changes below this directory: forget what is cached below it
)

// Event is one change on the owner. Path is share-relative; Entry holds the new attributes for
// EventChanged (the mount may trust them without a STAT).
type Event struct {
	Kind  uint8
	Path  string
	Entry Entry
}

// Events is the body of an EVENTS frame: a batch of changes, in the order they happened.
type Events struct{ List []Event }

func (m *Events) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.u32(uint32(len(m.List)))
	for i := range m.List {
		ev := &m.List[i]
		e.u8(ev.Kind)
		e.str(ev.Path)
		if ev.Kind == EventChanged {
			e.b = ev.Entry.AppendTo(e.b)
		}
	}
	return e.b
}

func (m *Events) Decode(b []byte) error {
	d := decoder{b: b}
	n := d.u32("count")
	if d.err == nil && uint64(n)*3 > uint64(len(d.b)) {
		d.fail("event count")
	}
	if d.err != nil {
		return d.err
	}
	m.List = make([]Event, 0, n)
	for i := uint32(0); i < n && d.err == nil; i++ {
		var ev Event
		ev.Kind = d.u8("kind")
		ev.Path = d.path("path")
		switch ev.Kind {
		case EventChanged:
			ev.Entry.decode(&d)
		case EventRemoved, EventRescan:
		default:
			d.fail("event kind")
		}
		m.List = append(m.List, ev)
	}
	return d.done("EVENTS")
}
