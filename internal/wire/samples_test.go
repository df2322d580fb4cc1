package wire

import (
	"encoding/binary"
	"math"
	"reflect"
	"strings"
)

// message is what every body type implements.
type message interface {
	AppendTo([]byte) []byte
	Decode([]byte) error
}

// fresh returns a new zero value of m's type, to decode into.
func fresh(m message) message {
	return reflect.New(reflect.TypeOf(m).Elem()).Interface().(message)
}

// sample is one valid body, named for the seed corpus, with the frame it travels in.
type sample struct {
	name  string // seed file name: lower-case op, then what is special about it
	op    Op
	flags Flags // FlagResponse for a reply
	msg   message
}

var testHash = func() (h [HashLen]byte) {
	for i := range h {
		h[i] = byte(i*7 + 1)
	}
	return h
}()

func fileEntry(name string) Entry {
	return Entry{
		Name: name, Mode: ModeRegular | 0o644, Size: 1234567, MtimeNs: 1_700_000_000_123_456_789,
		AtimeNs: 1_700_000_001_000_000_000, CtimeNs: 1_700_000_000_999_999_999, Ino: 0x0123456789,
		Nlink: 1, UID: 1000, GID: 1000,
	}
}

func dirEntry(name string) Entry {
	e := fileEntry(name)
	e.Mode, e.Size, e.Nlink = ModeDir|0o755, 4096, 3
	return e
}

func linkEntry(name, target string) Entry {
	e := fileEntry(name)
	e.Mode, e.Size, e.Target = ModeSymlink|0o777, uint64(len(target)), target
	return e
}

// inlineEntry is a regular file whose content travels in the Entry (READDIR with InlineMax).
func inlineEntry(name, data string) Entry {
	e := fileEntry(name)
	e.Size, e.HasData = uint64(len(data)), true
	if data != "" {
		e.Data = []byte(data)
	}
	return e
}

// samples holds at least one valid body of every message type, and of every op with a body.
var samples = []sample{
	{"hello", OpHello, 0, &Hello{MinVersion: VersionMin, MaxVersion: VersionMax, MaxFrameLen: MaxFrameLen, Name: "laptop"}},
	{"hello-wide-range", OpHello, 0, &Hello{MinVersion: 0, MaxVersion: math.MaxUint16, MaxFrameLen: math.MaxUint32, Name: strings.Repeat("n", MaxNameLen)}},
	{"close", OpClose, 0, &ErrorMsg{Code: ErrnoProtocol, Message: "protocol violation: frame header: reserved header bits set"}},
	{"error", OpError, FlagResponse, &ErrorMsg{Code: ENOENT, Message: `stat "src/main.go": no such file or directory`}},
	{"error-bare", OpError, FlagResponse, &ErrorMsg{Code: 4242}},
	{"error-longest", OpError, FlagResponse, &ErrorMsg{Code: EIO, Message: strings.Repeat("m", MaxMessageLen)}},
	{"credit", OpCredit, 0, &Credit{Bytes: 4 << 20}},
	{"credit-max", OpCredit, FlagResponse, &Credit{Bytes: math.MaxUint32}},
	{"end", OpEnd, FlagResponse, &StreamEnd{Size: 9<<20 + 12345, Hash: testHash}},
	{"shares-reply", OpShares, FlagResponse, &Shares{List: []ShareInfo{{Name: "projects"}, {Name: "photos.2024", ReadOnly: true}}}},
	{"shares-reply-empty", OpShares, FlagResponse, &Shares{List: []ShareInfo{}}},
	{"stat", OpStat, 0, &PathReq{Share: "projects", Path: "src/main.go"}},
	{"stat-root", OpStat, 0, &PathReq{Share: "p", Path: ""}},
	{"stat-reply", OpStat, FlagResponse, &Entry{Mode: ModeRegular | 0o600, Size: 42, MtimeNs: -1, Ino: 7, Nlink: 1}},
	{"stat-reply-symlink", OpStat, FlagResponse, &Entry{Mode: ModeSymlink | 0o777, Size: 6, Target: "../out"}},
	{"readdir", OpReadDir, 0, &ReadDirReq{Share: "projects", Path: "src"}},
	{"readdir-inline", OpReadDir, 0, &ReadDirReq{Share: "projects", Path: "", InlineMax: MaxInline}},
	{"readdir-reply", OpReadDir, FlagResponse, &Entries{List: []Entry{
		dirEntry(".git"), fileEntry("README.md"), fileEntry("a"), linkEntry("latest", "builds/2024-06-01"), fileEntry("main.go"),
	}}},
	{"list", OpList, 0, &ListReq{ReadDirReq: ReadDirReq{Share: "projects", Path: "src", InlineMax: 4096}, Window: 4 << 20}},
	{"list-reply", OpList, FlagResponse, &Entries{List: []Entry{dirEntry(".git"), fileEntry("README.md")}}},
	{"readdir-reply-empty", OpReadDir, FlagResponse, &Entries{List: []Entry{}}},
	{"readdir-reply-longest", OpReadDir, FlagResponse, &Entries{List: []Entry{
		linkEntry(strings.Repeat("l", MaxNameLen), strings.Repeat("t", MaxPathLen)),
	}}},
	{"readdir-reply-inline", OpReadDir, FlagResponse, &Entries{List: []Entry{
		dirEntry("cmd"), inlineEntry("empty", ""), inlineEntry("go.mod", "module example.com/x\n\ngo 1.26\n"), fileEntry("large.bin"),
	}}},
	{"readdir-reply-inline-max", OpReadDir, FlagResponse, &Entries{List: []Entry{
		inlineEntry(strings.Repeat("i", MaxNameLen), strings.Repeat("d", MaxInline)),
	}}},
	{"read", OpRead, 0, &ReadReq{Share: "projects", Path: "data/big.bin", Offset: 1 << 40, Length: MaxChunk}},
	{"get", OpGet, 0, &GetReq{Share: "projects", Path: "data/big.bin", Offset: 0, Window: 16 << 20}},
	{"get-resume", OpGet, 0, &GetReq{Share: "projects", Path: "data/big.bin", Offset: 123456789, Window: MinWindow}},
	{"get-reply", OpGet, FlagResponse, &Entry{Mode: ModeRegular | 0o644, Size: 9<<20 + 12345, MtimeNs: 1_700_000_000_000_000_000, Nlink: 1}},
	{"stream", OpStream, 0, &StreamReq{Share: "projects", Path: "data/big.bin", Offset: 64 << 20, Length: 1 << 62, Window: 8 << 20}},
	{"stream-reply", OpStream, FlagResponse, &Entry{Mode: ModeRegular | 0o644, Size: 9<<20 + 12345, MtimeNs: 1_700_000_000_000_000_000, Nlink: 1}},
	{"put", OpPut, 0, &PutReq{Share: "inbox", Path: "photos/img_0001.jpg", Size: 3 << 20, Mode: 0o644, MtimeNs: 1_600_000_000_000_000_000}},
	{"put-resume", OpPut, 0, &PutReq{Share: "inbox", Path: "photos/img_0001.jpg", Size: 3 << 20, Mode: 0o600, MtimeNs: -5, Flags: PutResume}},
	{"put-reply", OpPut, FlagResponse, &PutResp{Offset: 1 << 20, Window: 16 << 20}},
	{"mkdir", OpMkdir, 0, &MkdirReq{Share: "inbox", Path: "photos/2024", Mode: 0o755}},
	{"mkdir-exclusive", OpMkdir, 0, &MkdirReq{Share: "inbox", Path: "photos/2024", Mode: 0o755, Flags: NameExclusive}},
	{"mkdir-reply", OpMkdir, FlagResponse, &Entry{Mode: ModeDir | 0o755, Size: 4096, MtimeNs: 1_700_000_000_000_000_000, Ino: 31, Nlink: 2}},
	{"symlink-reply", OpSymlink, FlagResponse, &Entry{Mode: ModeSymlink | 0o777, Size: 9, Ino: 32, Nlink: 1, Target: "2024/june"}},
	{"symlink", OpSymlink, 0, &SymlinkReq{Share: "inbox", Path: "photos/latest", Target: "2024/june"}},
	{"symlink-exclusive", OpSymlink, 0, &SymlinkReq{Share: "inbox", Path: "photos/latest", Target: "2024/june", Flags: NameExclusive}},
	{"symlink-absolute-target", OpSymlink, 0, &SymlinkReq{Share: "inbox", Path: "etc", Target: "/etc"}},
	{"setattr", OpSetAttr, 0, &SetAttrReq{Share: "inbox", Path: "photos", Valid: SetMode | SetMtime, Mode: 0o750, MtimeNs: 1_650_000_000_000_000_000}},
	{"setattr-mode", OpSetAttr, 0, &SetAttrReq{Share: "inbox", Path: "a.txt", Valid: SetMode, Mode: 0o600}},
	{"setattr-size", OpSetAttr, 0, &SetAttrReq{Share: "inbox", Path: "db/wal", Valid: SetSize, Size: 1 << 33}},
	{"setattr-times", OpSetAttr, 0, &SetAttrReq{Share: "inbox", Path: "a.txt", Valid: SetAtime | SetMtime,
		MtimeNs: 1_650_000_000_000_000_001, AtimeNs: -1_000_000_000}},
	{"setattr-reply", OpSetAttr, FlagResponse, &ChangeResp{
		Entry: Entry{Mode: ModeRegular | 0o600, Size: 1 << 33, MtimeNs: 1_650_000_000_000_000_001, CtimeNs: 1_700_000_000_000_000_007, Ino: 99, Nlink: 1},
		Pre:   FileState{Size: 12, MtimeNs: 1_650_000_000_000_000_000, CtimeNs: 1_650_000_000_000_000_000}}},

	{"statfs", OpStatfs, 0, &ShareReq{Share: "projects"}},
	{"statfs-reply", OpStatfs, FlagResponse, &Statfs{Bsize: 4096, Blocks: 244_190_646, Bfree: 100_000_000, Bavail: 87_000_000,
		Files: 61_054_976, Ffree: 60_000_000, NameLen: 255}},
	{"getxattr", OpGetXattr, 0, &XattrReq{Share: "projects", Path: "README.md", Name: "user.xdg.origin.url"}},
	{"listxattr", OpListXattr, 0, &PathReq{Share: "projects", Path: "README.md"}},
	{"listxattr-reply", OpListXattr, FlagResponse, &XattrNames{Names: []string{"user.a", "user.xdg.origin.url"}}},
	{"listxattr-reply-empty", OpListXattr, FlagResponse, &XattrNames{Names: []string{}}},
	{"watch", OpWatch, 0, &ShareReq{Share: "projects"}},
	{"events", OpEvents, FlagResponse, &Events{List: []Event{
		{Kind: EventChanged, Path: "src/main.go", Entry: fileEntry("")},
		{Kind: EventChanged, Path: "src/small.txt", Entry: inlineEntry("", "tiny")},
		{Kind: EventRemoved, Path: "src/old.go"},
		{Kind: EventRescan, Path: "build"},
		{Kind: EventChanged, Path: "", Entry: dirEntry("")},
	}}},
	{"events-empty", OpEvents, FlagResponse, &Events{List: []Event{}}},

	{"create", OpCreate, 0, &CreateReq{Share: "inbox", Path: "notes/todo.txt", Mode: 0o644}},
	{"create-exclusive", OpCreate, 0, &CreateReq{Share: "inbox", Path: ".todo.txt.swp", Mode: 0o600, Flags: CreateExclusive}},
	{"create-truncate", OpCreate, 0, &CreateReq{Share: "inbox", Path: "out.log", Mode: 0o640, Flags: CreateTruncate}},
	{"create-with-data", OpCreate, 0, &CreateReq{Share: "inbox", Path: "notes/new.txt", Mode: 0o644,
		Flags: CreateExclusive | CreateWithData, Data: []byte("first line\n")}},
	{"create-with-times", OpCreate, 0, &CreateReq{Share: "inbox", Path: "notes/empty.txt", Mode: 0o644,
		Flags: CreateExclusive | CreateSetTimes, AtimeNs: 1_700_000_000_123_456_789, MtimeNs: 1_700_000_000_123_456_789}},
	{"create-reply", OpCreate, FlagResponse, &Entry{Mode: ModeRegular | 0o644, MtimeNs: 1_700_000_000_000_000_000, Ino: 12, Nlink: 1, UID: 1000, GID: 1000}},
	{"write-reply", OpWrite, FlagResponse, &ChangeResp{
		Entry: Entry{Mode: ModeRegular | 0o644, Size: 1<<20 + 4096, MtimeNs: 1_700_000_000_000_000_123, CtimeNs: 1_700_000_000_000_000_123, Ino: 12, Nlink: 1},
		Pre:   FileState{Size: 4096, MtimeNs: 1_700_000_000_000_000_000, CtimeNs: 1_700_000_000_000_000_000}}},
	{"unlink", OpUnlink, 0, &PathReq{Share: "inbox", Path: "notes/todo.txt"}},
	{"rmdir", OpRmdir, 0, &PathReq{Share: "inbox", Path: "notes"}},
	{"rename", OpRename, 0, &RenameReq{Share: "inbox", From: "notes/.todo.txt.swp", To: "notes/todo.txt"}},
	{"rename-noreplace", OpRename, 0, &RenameReq{Share: "inbox", From: "a", To: "dir/b", Flags: RenameNoReplace}},
	{"rename-exchange", OpRename, 0, &RenameReq{Share: "inbox", From: "current", To: "next", Flags: RenameExchange}},
	{"link", OpLink, 0, &LinkReq{Share: "inbox", From: "photos/img_0001.jpg", To: "album/cover.jpg"}},
	{"link-reply", OpLink, FlagResponse, &Entry{Mode: ModeRegular | 0o644, Size: 3 << 20, Ino: 77, Nlink: 2}},
	{"setxattr", OpSetXattr, 0, &XattrReq{Share: "inbox", Path: "a.txt", Name: "user.comment", Value: []byte("\x00binary\xff value"), Flags: XattrCreate}},
	{"setxattr-replace-empty", OpSetXattr, 0, &XattrReq{Share: "inbox", Path: "", Name: "user.e", Flags: XattrReplace}},
	{"setxattr-longest", OpSetXattr, 0, &XattrReq{Share: "inbox", Path: "a.txt",
		Name: "user." + strings.Repeat("n", MaxXattrName-len("user.")), Value: []byte(strings.Repeat("v", MaxXattrValue))}},
	{"removexattr", OpRemoveXattr, 0, &XattrReq{Share: "inbox", Path: "a.txt", Name: "user.comment"}},
	{"fallocate", OpFallocate, 0, &FallocateReq{Share: "inbox", Path: "vm/disk.img", Mode: 0, Offset: 0, Length: 10 << 30}},
	{"fallocate-punch", OpFallocate, 0, &FallocateReq{Share: "inbox", Path: "vm/disk.img", Mode: 0x03, Offset: 1 << 20, Length: 1 << 20}},
	{"fallocate-reply", OpFallocate, FlagResponse, &Entry{Mode: ModeRegular | 0o600, Size: 10 << 30, Ino: 5, Nlink: 1}},
	{"fsync", OpFsync, 0, &FsyncReq{Share: "inbox", Path: "db/main.sqlite"}},
	{"fsync-data", OpFsync, 0, &FsyncReq{Share: "inbox", Path: "db/main.sqlite-wal", DataOnly: true}},
	{"fsync-root", OpFsync, 0, &FsyncReq{Share: "inbox", Path: ""}},
	{"setattr-owner", OpSetAttr, 0, &SetAttrReq{Share: "inbox", Path: "a.txt", Valid: SetUID | SetGID, UID: 1000, GID: 100}},
	{"mknod-fifo", OpMknod, 0, &MknodReq{Share: "inbox", Path: "run/queue", Mode: ModeFIFO | 0o600}},
	{"mknod-char", OpMknod, 0, &MknodReq{Share: "inbox", Path: "dev/null", Mode: ModeChar | 0o666, Rdev: 0x103}},
	{"mknod-reply", OpMknod, FlagResponse, &Entry{Mode: ModeFIFO | 0o600, Ino: 78, Nlink: 1}},
	{"mknod-reply-device", OpMknod, FlagResponse, &Entry{Mode: ModeChar | 0o666, Ino: 79, Nlink: 1, Rdev: 0x103}},
	{"apply", OpApply, 0, &ApplyReq{Share: "inbox", Journal: JournalID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, First: 41, Ops: []ApplyOp{
		{Op: OpMkdir, Body: (&MkdirReq{Share: "inbox", Path: "src", Mode: 0o755, Flags: NameExclusive}).AppendTo(nil)},
		{Op: OpCreate, Body: (&CreateReq{Share: "inbox", Path: "src/main.c", Mode: 0o644, Flags: CreateExclusive | CreateWithData, Data: []byte("int main;\n")}).AppendTo(nil)},
		{Op: OpWrite, Flags: ApplyHasBase, Base: FileState{Size: 4096, MtimeNs: 1_700_000_000_000_000_000, CtimeNs: 1_700_000_000_000_000_001},
			Body: append((&WriteReq{Share: "inbox", Path: "notes.txt", Offset: 4096}).AppendTo(nil), "more"...)},
		{Op: OpRename, Body: (&RenameReq{Share: "inbox", From: "src/.main.c.swp", To: "src/main.c"}).AppendTo(nil)},
	}}},
	{"apply-sync-only", OpApply, 0, &ApplyReq{Share: "inbox", Journal: JournalID{0xff}, First: 1, Flags: ApplySync}},
	{"apply-reply", OpApply, FlagResponse, &ApplyResp{Applied: 44, Durable: 40, Results: []ApplyResult{
		{Code: 0, Body: (&Entry{Mode: ModeDir | 0o755, Ino: 80, Nlink: 2}).AppendTo(nil)},
		{Code: 0},
		{Code: ErrnoConflict, Body: (&Entry{Mode: ModeRegular | 0o644, Size: 5000, Ino: 81, Nlink: 1}).AppendTo(nil)},
		{Code: ENOENT, Body: []byte("no such file or directory")},
	}}},
	{"apply-reply-gap", OpApply, FlagResponse, &ApplyResp{Applied: 12, Durable: 12}},
}

// rawFrame is a seed whose body has no message type: fixed raw bytes or empty.
type rawFrame struct {
	name string
	h    Header // Len is filled in
	body []byte
}

func dataBody(off uint64, data string) []byte {
	return append(binary.BigEndian.AppendUint64(nil, off), data...)
}

var rawFrames = []rawFrame{
	{"ping", Header{Op: OpPing}, binary.BigEndian.AppendUint64(nil, 123_456_789)},
	{"pong", Header{Op: OpPong}, binary.BigEndian.AppendUint64(nil, 123_456_789)},
	{"cancel", Header{Op: OpCancel, Tag: 9}, nil},
	{"data", Header{Op: OpData, Flags: FlagResponse, Tag: 5}, dataBody(1<<20, "the bytes of the file, raw")},
	{"data-put", Header{Op: OpData, Tag: 6}, dataBody(0, "\x00\x01\x02\xff")},
	{"shares", Header{Op: OpShares, Tag: 1}, nil},
	{"read-reply", Header{Op: OpRead, Flags: FlagResponse, Tag: 2}, []byte("hello, world\n")},
	{"readdir-reply-more", Header{Op: OpReadDir, Flags: FlagResponse | FlagMore, Tag: 8},
		(&Entries{List: []Entry{fileEntry("part-one")}}).AppendTo(nil)},
	{"getxattr-reply", Header{Op: OpGetXattr, Flags: FlagResponse, Tag: 2}, []byte("https://example.com/\x00raw")},
	{"getxattr-reply-empty", Header{Op: OpGetXattr, Flags: FlagResponse, Tag: 2}, nil},
	{"watch-reply", Header{Op: OpWatch, Flags: FlagResponse, Tag: 10}, nil},
	{"write", Header{Op: OpWrite, Tag: 11}, writeBody(WriteReq{Share: "inbox", Path: "notes/todo.txt", Offset: 1 << 20}, "- buy milk\n")},
	{"write-empty", Header{Op: OpWrite, Tag: 11}, writeBody(WriteReq{Share: "inbox", Path: "a", Offset: 0}, "")},
	{"unlink-reply", Header{Op: OpUnlink, Flags: FlagResponse, Tag: 12}, nil},
	{"rmdir-reply", Header{Op: OpRmdir, Flags: FlagResponse, Tag: 12}, nil},
	{"rename-reply", Header{Op: OpRename, Flags: FlagResponse, Tag: 12}, nil},
	{"setxattr-reply", Header{Op: OpSetXattr, Flags: FlagResponse, Tag: 12}, nil},
	{"removexattr-reply", Header{Op: OpRemoveXattr, Flags: FlagResponse, Tag: 12}, nil},
	{"fsync-reply", Header{Op: OpFsync, Flags: FlagResponse, Tag: 12}, nil},
	// PUNCH bodies are punch messages (internal/punch, docs/PROTOCOL.md "PUNCH"), opaque to
	// wire: CANDIDATES of attempt 7, a local 10.1.0.2:7462 and an observed 198.51.100.2:7462.
	{"punch", Header{Op: OpPunch, Tag: 13}, []byte("\x01\x01\x00\x00\x00\x07\x02" +
		"\x02\x04\x0a\x01\x00\x02\x1d\x26" + "\x01\x04\xc6\x33\x64\x02\x1d\x26")},
	{"punch-reply", Header{Op: OpPunch, Flags: FlagResponse, Tag: 13}, []byte("\x01\x01\x00\x00\x00\x07\x01" +
		"\x01\x04\xcb\x00\x71\x06\x1d\x26")},
}

// writeBody is a WRITE request body: the head, then the raw bytes.
func writeBody(m WriteReq, data string) []byte { return append(m.AppendTo(nil), data...) }

// frame builds header + body.
func frame(h Header, body []byte) []byte {
	h.Len = uint32(len(body))
	b := make([]byte, HeaderLen, HeaderLen+len(body))
	h.Put(b)
	return append(b, body...)
}

// seedFrames returns every seed frame by name: each sample in its frame (tag 0 for HELLO and
// link control, 1 otherwise) and each raw frame.
func seedFrames() map[string][]byte {
	seeds := map[string][]byte{}
	for _, s := range samples {
		h := Header{Op: s.op, Flags: s.flags, Tag: 1}
		if s.op == OpHello || s.op == OpClose {
			h.Tag = 0
		}
		seeds[s.name] = frame(h, s.msg.AppendTo(nil))
	}
	for _, r := range rawFrames {
		seeds[r.name] = frame(r.h, r.body)
	}
	return seeds
}
