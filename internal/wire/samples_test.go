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
	{"readdir", OpReadDir, 0, &PathReq{Share: "projects", Path: "src"}},
	{"readdir-reply", OpReadDir, FlagResponse, &Entries{List: []Entry{
		dirEntry(".git"), fileEntry("README.md"), fileEntry("a"), linkEntry("latest", "builds/2024-06-01"), fileEntry("main.go"),
	}}},
	{"readdir-reply-empty", OpReadDir, FlagResponse, &Entries{List: []Entry{}}},
	{"readdir-reply-longest", OpReadDir, FlagResponse, &Entries{List: []Entry{
		linkEntry(strings.Repeat("l", MaxNameLen), strings.Repeat("t", MaxPathLen)),
	}}},
	{"read", OpRead, 0, &ReadReq{Share: "projects", Path: "data/big.bin", Offset: 1 << 40, Length: MaxChunk}},
	{"get", OpGet, 0, &GetReq{Share: "projects", Path: "data/big.bin", Offset: 0, Window: 16 << 20}},
	{"get-resume", OpGet, 0, &GetReq{Share: "projects", Path: "data/big.bin", Offset: 123456789, Window: MinWindow}},
	{"get-reply", OpGet, FlagResponse, &Entry{Mode: ModeRegular | 0o644, Size: 9<<20 + 12345, MtimeNs: 1_700_000_000_000_000_000, Nlink: 1}},
	{"put", OpPut, 0, &PutReq{Share: "inbox", Path: "photos/img_0001.jpg", Size: 3 << 20, Mode: 0o644, MtimeNs: 1_600_000_000_000_000_000}},
	{"put-resume", OpPut, 0, &PutReq{Share: "inbox", Path: "photos/img_0001.jpg", Size: 3 << 20, Mode: 0o600, MtimeNs: -5, Flags: PutResume}},
	{"put-reply", OpPut, FlagResponse, &PutResp{Offset: 1 << 20, Window: 16 << 20}},
	{"mkdir", OpMkdir, 0, &MkdirReq{Share: "inbox", Path: "photos/2024", Mode: 0o755}},
	{"symlink", OpSymlink, 0, &SymlinkReq{Share: "inbox", Path: "photos/latest", Target: "2024/june"}},
	{"symlink-absolute-target", OpSymlink, 0, &SymlinkReq{Share: "inbox", Path: "etc", Target: "/etc"}},
	{"setattr", OpSetAttr, 0, &SetAttrReq{Share: "inbox", Path: "photos", Valid: SetMode | SetMtime, Mode: 0o750, MtimeNs: 1_650_000_000_000_000_000}},
	{"setattr-mode", OpSetAttr, 0, &SetAttrReq{Share: "inbox", Path: "a.txt", Valid: SetMode, Mode: 0o600}},
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
	{"mkdir-reply", Header{Op: OpMkdir, Flags: FlagResponse, Tag: 3}, nil},
	{"symlink-reply", Header{Op: OpSymlink, Flags: FlagResponse, Tag: 3}, nil},
	{"setattr-reply", Header{Op: OpSetAttr, Flags: FlagResponse, Tag: 4}, nil},
	{"readdir-reply-more", Header{Op: OpReadDir, Flags: FlagResponse | FlagMore, Tag: 8},
		(&Entries{List: []Entry{fileEntry("part-one")}}).AppendTo(nil)},
}

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
