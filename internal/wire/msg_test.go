package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, s := range samples {
		t.Run(s.name, func(t *testing.T) {
			b := s.msg.AppendTo(nil)
			got := fresh(s.msg)
			if err := got.Decode(b); err != nil {
				t.Fatalf("Decode(AppendTo(%+v)) = %v", s.msg, err)
			}
			if !reflect.DeepEqual(got, s.msg) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, s.msg)
			}
			// AppendTo appends: a prefix stays as it was and the body follows it.
			prefix := []byte("hdr:")
			b2 := s.msg.AppendTo(append([]byte(nil), prefix...))
			if !bytes.Equal(b2[:len(prefix)], prefix) || !bytes.Equal(b2[len(prefix):], b) {
				t.Fatalf("AppendTo with a prefix wrote %x, want %x then %x", b2, prefix, b)
			}
		})
	}
}

// Every body has an exact length: any prefix of a valid body and any extension of it fail.
func TestDecodeTruncatedAndTrailing(t *testing.T) {
	for _, s := range samples {
		t.Run(s.name, func(t *testing.T) {
			b := s.msg.AppendTo(nil)
			for n := 0; n < len(b); n++ {
				if err := fresh(s.msg).Decode(b[:n]); err == nil {
					t.Fatalf("Decode of the first %d of %d bytes succeeded", n, len(b))
				} else if !errors.Is(err, ErrMalformed) {
					t.Fatalf("Decode of the first %d of %d bytes: %v, not ErrMalformed", n, len(b), err)
				}
			}
			for _, extra := range [][]byte{{0}, {0xFF}, make([]byte, 64)} {
				err := fresh(s.msg).Decode(append(append([]byte(nil), b...), extra...))
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("Decode with %d trailing bytes: %v, want ErrMalformed", len(extra), err)
				}
			}
		})
	}
}

// Bodies are built with AppendTo, which does not judge what it writes, so each case is a body a
// careless or hostile peer could send.
func TestDecodeRefusesBadShareNames(t *testing.T) {
	for _, share := range []string{"", ".hidden", "a/b", "a b", "a\x00", "é", strings.Repeat("s", MaxShareNameLen+1)} {
		for _, m := range shareBodies(share, "ok/path") {
			if err := fresh(m).Decode(m.AppendTo(nil)); !errors.Is(err, ErrMalformed) {
				t.Errorf("%T with share %q: %v, want ErrMalformed", m, share, err)
			}
		}
	}
}

// shareBodies returns one body of every type that names a share, each naming share; all but
// the last two (ShareReq, Shares) also carry path.
func shareBodies(share, path string) []message {
	return append(pathBodies(share, path), &ShareReq{Share: share}, &Shares{List: []ShareInfo{{Name: "good"}, {Name: share}}})
}

// pathBodies returns one body of every request type that carries a path.
func pathBodies(share, path string) []message {
	return []message{
		&PathReq{Share: share, Path: path},
		&ReadReq{Share: share, Path: path, Length: 1},
		&GetReq{Share: share, Path: path, Window: MinWindow},
		&StreamReq{Share: share, Path: path, Length: 1, Window: MinWindow},
		&PutReq{Share: share, Path: path},
		&MkdirReq{Share: share, Path: path},
		&SymlinkReq{Share: share, Path: path, Target: "t"},
		&SetAttrReq{Share: share, Path: path},
		&ReadDirReq{Share: share, Path: path},
		&ListReq{ReadDirReq: ReadDirReq{Share: share, Path: path}, Window: MinWindow},
		&CreateReq{Share: share, Path: path},
		&RenameReq{Share: share, From: path, To: "to"},
		&RenameReq{Share: share, From: "from", To: path},
		&LinkReq{Share: share, From: path, To: "to"},
		&LinkReq{Share: share, From: "from", To: path},
		&XattrReq{Share: share, Path: path, Name: "user.x"},
		&FallocateReq{Share: share, Path: path, Length: 1},
		&FsyncReq{Share: share, Path: path},
		&MknodReq{Share: share, Path: path, Mode: ModeFIFO},
		&writeMsg{WriteReq{Share: share, Path: path}, []byte("data")},
	}
}

// writeMsg adapts a WRITE body (head and raw bytes) to message, for the tables that judge every
// request type alike.
type writeMsg struct {
	head WriteReq
	data []byte
}

func (m *writeMsg) AppendTo(b []byte) []byte { return append(m.head.AppendTo(b), m.data...) }

func (m *writeMsg) Decode(b []byte) error {
	data, err := m.head.Decode(b)
	m.data = data
	return err
}

var badPaths = []string{
	"..", "../etc/passwd", "a/../../b", ".", "./a", "a/.",
	"/", "/etc/passwd",
	"a\x00b", "\x00",
	"a//b", "a/", "/a/",
	strings.Repeat("c", MaxNameLen+1),
	"dir/" + strings.Repeat("c", MaxNameLen+1),
	strings.Repeat("a/", MaxPathLen/2) + "a", // 4097 bytes of short components
}

func TestDecodeRefusesBadPaths(t *testing.T) {
	for _, p := range badPaths {
		for _, m := range pathBodies("share", p) {
			err := fresh(m).Decode(m.AppendTo(nil))
			if err == nil {
				t.Errorf("%T with path %.30q… (%d bytes) decoded", m, p, len(p))
				continue
			}
			// Paths over MaxPathLen fail as over-long strings (ErrMalformed); the others as
			// refused paths, so the owner can answer PATH_REFUSED.
			if len(p) <= MaxPathLen && !errors.Is(err, ErrPathRefused) {
				t.Errorf("%T with path %.30q…: %v, want ErrPathRefused", m, p, err)
			}
		}
	}
}

// ErrMalformed's contract: it is wrapped by every body decoding error, a refused path included,
// so a session can tell "the peer sent garbage" from anything else with one errors.Is.
func TestDecodeErrorsWrapErrMalformed(t *testing.T) {
	m := &PathReq{Share: "share", Path: "../x"}
	err := fresh(m).Decode(m.AppendTo(nil))
	if !errors.Is(err, ErrMalformed) || !errors.Is(err, ErrPathRefused) {
		t.Fatalf("path \"../x\": %v; want an error matching both ErrMalformed and ErrPathRefused", err)
	}
}

func TestDecodeRefusesOverlongStrings(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	cases := []struct {
		name string
		m    message
	}{
		{"hello name", &Hello{MinVersion: 1, MaxVersion: 1, Name: long(MaxNameLen + 1)}},
		{"entry name", &Entry{Name: long(MaxNameLen + 1)}},
		{"entry target", &Entry{Target: long(MaxPathLen + 1)}},
		{"entries entry target", &Entries{List: []Entry{linkEntry("link", long(MaxPathLen+1))}}},
		{"symlink target", &SymlinkReq{Share: "s", Path: "l", Target: long(MaxPathLen + 1)}},
		{"share name", &PathReq{Share: long(MaxShareNameLen + 1), Path: "a"}},
		{"path", &PathReq{Share: "s", Path: long(MaxPathLen + 1)}},
		{"xattr name", &XattrReq{Share: "s", Path: "a", Name: "user." + long(MaxXattrName-len("user.")+1)}},
		{"xattr value", &XattrReq{Share: "s", Path: "a", Name: "user.x", Value: []byte(long(MaxXattrValue + 1))}},
		{"xattr list name", &XattrNames{Names: []string{"user.a", long(MaxXattrName + 1)}}},
		{"inline data", &Entry{Name: "f", HasData: true, Data: []byte(long(MaxInline + 1))}},
		{"entries inline data", &Entries{List: []Entry{inlineEntry("f", long(MaxInline+1))}}},
		{"event path", &Events{List: []Event{{Kind: EventRemoved, Path: long(MaxPathLen + 1)}}}},
		{"event entry target", &Events{List: []Event{{Kind: EventChanged, Path: "l", Entry: linkEntry("", long(MaxPathLen+1))}}}},
		{"write path", &writeMsg{WriteReq{Share: "s", Path: long(MaxPathLen + 1)}, nil}},
		{"write data", &writeMsg{WriteReq{Share: "s", Path: "f"}, make([]byte, MaxChunk+1)}},
	}
	for _, tc := range cases {
		if err := fresh(tc.m).Decode(tc.m.AppendTo(nil)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", tc.name, err)
		}
	}
	// ErrorMsg.AppendTo cuts the message to MaxMessageLen, so the over-long body is built by hand.
	b := binary.BigEndian.AppendUint32(nil, uint32(EIO))
	b = binary.BigEndian.AppendUint16(b, MaxMessageLen+1)
	b = append(b, long(MaxMessageLen+1)...)
	if err := new(ErrorMsg).Decode(b); !errors.Is(err, ErrMalformed) {
		t.Errorf("ERROR message of %d bytes: %v, want ErrMalformed", MaxMessageLen+1, err)
	}
	var m ErrorMsg
	cut := (&ErrorMsg{Code: EIO, Message: long(3 * MaxMessageLen)}).AppendTo(nil)
	if err := m.Decode(cut); err != nil || len(m.Message) != MaxMessageLen {
		t.Errorf("AppendTo of a long message: decoded %d bytes, %v; want it cut to %d", len(m.Message), err, MaxMessageLen)
	}
}

func TestDecodeRefusesBadFlagsAndFields(t *testing.T) {
	cases := []struct {
		name string
		m    message
	}{
		{"PUT unknown flag", &PutReq{Share: "s", Path: "f", Flags: 1 << 1}},
		{"PUT high flag", &PutReq{Share: "s", Path: "f", Flags: PutResume | 1<<31}},
		{"PUT to the share root", &PutReq{Share: "s", Path: ""}},
		{"SETATTR unknown bit", &SetAttrReq{Share: "s", Path: "f", Valid: 1 << 6}},
		{"SETATTR high bit", &SetAttrReq{Share: "s", Path: "f", Valid: SetMode | 1<<31}},
		{"MKNOD at the share root", &MknodReq{Share: "s", Path: "", Mode: ModeFIFO}},
		{"MKNOD of a regular file", &MknodReq{Share: "s", Path: "f", Mode: ModeRegular | 0o644}},
		{"MKNOD of a directory", &MknodReq{Share: "s", Path: "f", Mode: ModeDir | 0o755}},
		{"MKNOD unknown mode bits", &MknodReq{Share: "s", Path: "f", Mode: ModeFIFO | 1<<20}},
		{"MKDIR of the share root", &MkdirReq{Share: "s", Path: "", Mode: 0o755}},
		{"SYMLINK at the share root", &SymlinkReq{Share: "s", Path: "", Target: "x"}},
		{"SYMLINK with no target", &SymlinkReq{Share: "s", Path: "l", Target: ""}},
		{"MKDIR with unknown flags", &MkdirReq{Share: "s", Path: "d", Mode: 0o755, Flags: 1 << 1}},
		{"SYMLINK with unknown flags", &SymlinkReq{Share: "s", Path: "l", Target: "x", Flags: 1 << 5}},
		{"READ over MaxChunk", &ReadReq{Share: "s", Path: "f", Length: MaxChunk + 1}},
		{"READ of 4 GiB", &ReadReq{Share: "s", Path: "f", Length: 0xFFFFFFFF}},
		{"HELLO empty version range", &Hello{MinVersion: 2, MaxVersion: 1, MaxFrameLen: MaxFrameLen}},
		{"entry name with a slash", &Entry{Name: "a/b"}},
		{"entry name ..", &Entry{Name: ".."}},
		{"entry name .", &Entry{Name: "."}},
		{"entry name with NUL", &Entry{Name: "a\x00"}},
		{"entries with a bad name", &Entries{List: []Entry{fileEntry("good"), fileEntry("../bad")}}},
		{"GET window below MinWindow", &GetReq{Share: "s", Path: "f", Window: MinWindow - 1}},
		{"STREAM window below MinWindow", &StreamReq{Share: "s", Path: "f", Length: 1, Window: MinWindow - 1}},
		{"READDIR inline above MaxInline", &ReadDirReq{Share: "s", Path: "", InlineMax: MaxInline + 1}},
		{"READDIR inline 4 GiB", &ReadDirReq{Share: "s", Path: "", InlineMax: 0xFFFFFFFF}},
		{"LIST inline above MaxInline", &ListReq{ReadDirReq: ReadDirReq{Share: "s", InlineMax: MaxInline + 1}, Window: MinWindow}},
		{"LIST window below MinWindow", &ListReq{ReadDirReq: ReadDirReq{Share: "s"}, Window: MinWindow - 1}},
		{"CREATE unknown flag", &CreateReq{Share: "s", Path: "f", Flags: 1 << 4}},
		{"CREATE with too much data", &CreateReq{Share: "s", Path: "f", Flags: CreateWithData, Data: make([]byte, MaxChunk+1)}},
		{"CREATE high flag", &CreateReq{Share: "s", Path: "f", Flags: CreateExclusive | 1<<31}},
		{"CREATE at the share root", &CreateReq{Share: "s", Path: ""}},
		{"WRITE to the share root", &writeMsg{WriteReq{Share: "s", Path: ""}, []byte("x")}},
		{"RENAME with both flags", &RenameReq{Share: "s", From: "a", To: "b", Flags: RenameNoReplace | RenameExchange}},
		{"RENAME unknown flag", &RenameReq{Share: "s", From: "a", To: "b", Flags: 1 << 2}},
		{"RENAME of the share root", &RenameReq{Share: "s", From: "", To: "b"}},
		{"RENAME onto the share root", &RenameReq{Share: "s", From: "a", To: ""}},
		{"LINK from the share root", &LinkReq{Share: "s", From: "", To: "b"}},
		{"LINK onto the share root", &LinkReq{Share: "s", From: "a", To: ""}},
		{"XATTR empty name", &XattrReq{Share: "s", Path: "f", Name: ""}},
		{"XATTR create and replace", &XattrReq{Share: "s", Path: "f", Name: "user.x", Flags: XattrCreate | XattrReplace}},
		{"XATTR high flag", &XattrReq{Share: "s", Path: "f", Name: "user.x", Flags: 1 << 31}},
		{"LISTXATTR reply with an empty name", &XattrNames{Names: []string{"user.a", ""}}},
		{"LISTXATTR reply of one empty name", &XattrNames{Names: []string{""}}},
		{"event of unknown kind", &Events{List: []Event{{Kind: 9, Path: "a"}}}},
		{"event of kind 0", &Events{List: []Event{{Kind: 0, Path: "a"}}}},
		{"event with a bad path", &Events{List: []Event{{Kind: EventRemoved, Path: "../a"}}}},
		{"event entry with a bad name", &Events{List: []Event{{Kind: EventChanged, Path: "a", Entry: fileEntry("x/y")}}}},
	}
	for _, tc := range cases {
		if err := fresh(tc.m).Decode(tc.m.AppendTo(nil)); err == nil {
			t.Errorf("%s: decoded", tc.name)
		}
	}
	// The edges that are allowed.
	ok := []message{
		&ReadReq{Share: "s", Path: "f", Length: MaxChunk},
		&ReadReq{Share: "s", Path: "", Length: 0},
		&Hello{MinVersion: 3, MaxVersion: 3},
		&SetAttrReq{Share: "s", Path: "", Valid: 0},
		&GetReq{Share: "s", Path: "", Window: MinWindow},
		&Entry{Name: "...", Mode: 0xFFFFFFFF},
		&ReadDirReq{Share: "s", Path: "", InlineMax: MaxInline},
		&RenameReq{Share: "s", From: "a", To: "a"},
		&RenameReq{Share: "s", From: "a", To: "b", Flags: RenameExchange},
		&XattrReq{Share: "s", Path: "", Name: "x"}, // namespaces are the owner's to judge
		&FallocateReq{Share: "s", Path: "", Mode: 0xFFFFFFFF, Offset: 1<<64 - 1, Length: 1<<64 - 1},
		&writeMsg{WriteReq{Share: "s", Path: "f", Offset: 1<<64 - 1}, make([]byte, MaxChunk)},
		&writeMsg{WriteReq{Share: "s", Path: "f"}, nil},
		&Entry{Name: "n", HasData: true, Data: make([]byte, MaxInline)},
		&Events{List: []Event{{Kind: EventRemoved, Path: ""}}},
	}
	for _, m := range ok {
		if err := fresh(m).Decode(m.AppendTo(nil)); err != nil {
			t.Errorf("%T %+v: %v", m, m, err)
		}
	}
}

func TestHelloBadMagic(t *testing.T) {
	good := (&Hello{MinVersion: 1, MaxVersion: 1, MaxFrameLen: MaxFrameLen, Name: "n"}).AppendTo(nil)
	for _, magic := range []string{"prfs", "PRFT", "\x00\x00\x00\x00", "SSH-"} {
		b := append([]byte(magic), good[len(Magic):]...)
		if err := new(Hello).Decode(b); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "magic") {
			t.Errorf("magic %q: %v, want a bad-magic ErrMalformed", magic, err)
		}
	}
	// A TLS or HTTP peer talking at us: the first bytes are not even long enough or not ours.
	for _, junk := range []string{"", "PR", "GET / HTTP/1.1\r\n"} {
		if err := new(Hello).Decode([]byte(junk)); err == nil {
			t.Errorf("HELLO %q decoded", junk)
		}
	}
}

func TestFixedLengthBodies(t *testing.T) {
	cases := []struct {
		m    message
		want int
	}{
		{&Credit{}, CreditLen},
		{&StreamEnd{}, StreamEndLen},
		{&PutResp{}, PutRespLen},
		{&Statfs{}, StatfsLen},
	}
	for _, tc := range cases {
		if n := len(tc.m.AppendTo(nil)); n != tc.want {
			t.Errorf("%T encodes to %d bytes, want %d", tc.m, n, tc.want)
		}
		for _, n := range []int{0, tc.want - 1, tc.want + 1, 2 * tc.want} {
			if err := fresh(tc.m).Decode(make([]byte, n)); !errors.Is(err, ErrMalformed) {
				t.Errorf("%T of %d bytes: %v, want ErrMalformed", tc.m, n, err)
			}
		}
	}
	if StreamEndLen != 40 || PutRespLen != 12 || CreditLen != 4 || PingLen != 8 || DataHeaderLen != 8 || HeaderLen != 12 || StatfsLen != 52 {
		t.Error("a fixed length changed: that is a protocol change")
	}
}

func TestDataOffset(t *testing.T) {
	body := dataBody(0x0102030405060708, "raw")
	off, data, err := DataOffset(body)
	if err != nil || off != 0x0102030405060708 || string(data) != "raw" {
		t.Fatalf("DataOffset = %#x, %q, %v", off, data, err)
	}
	if &data[0] != &body[DataHeaderLen] {
		t.Error("DataOffset copied the bytes; it must return a view of the payload")
	}
	if _, data, err := DataOffset(make([]byte, DataHeaderLen)); err != nil || len(data) != 0 {
		t.Errorf("DataOffset of a bare offset = %q, %v", data, err)
	}
	for n := 0; n < DataHeaderLen; n++ {
		if _, _, err := DataOffset(make([]byte, n)); !errors.Is(err, ErrMalformed) {
			t.Errorf("DataOffset of %d bytes: %v, want ErrMalformed", n, err)
		}
	}
	b := make([]byte, DataHeaderLen+1)
	PutDataOffset(b, 1<<63)
	if off, _, _ := DataOffset(b); off != 1<<63 {
		t.Errorf("PutDataOffset then DataOffset = %#x", off)
	}
}

// READDIR entries may be as small as 61 bytes (a one-byte name, no target) and Shares items 4.
func TestEntriesShortNames(t *testing.T) {
	for _, names := range [][]string{{"a"}, {"a", "b", "c"}, {"go", "x.c", "abcd"}} {
		var m Entries
		for _, n := range names {
			m.List = append(m.List, fileEntry(n))
		}
		b := m.AppendTo(nil)
		var got Entries
		if err := got.Decode(b); err != nil || !reflect.DeepEqual(got, m) {
			t.Errorf("READDIR reply with names %q (%d bytes): %v; the entry-count guard in "+
				"Entries.Decode must allow entries of %d bytes", names, len(b), err, emptyEntryLen+1)
		}
	}
	short := Shares{List: []ShareInfo{{Name: "a"}, {Name: "b", ReadOnly: true}}}
	var got Shares
	if err := got.Decode(short.AppendTo(nil)); err != nil || !reflect.DeepEqual(got, short) {
		t.Errorf("SHARES reply of one-letter names: %+v, %v", got, err)
	}
}

// emptyEntryLen is the encoded size of an Entry with empty name and target.
var emptyEntryLen = len((&Entry{}).AppendTo(nil))

func TestEntryLengthBounds(t *testing.T) {
	if emptyEntryLen != 61 {
		t.Errorf("an empty Entry is %d bytes, want 61", emptyEntryLen)
	}
	if minEntryLen != emptyEntryLen {
		t.Errorf("minEntryLen is %d, an empty Entry %d bytes: the READDIR count guard is off", minEntryLen, emptyEntryLen)
	}
	if n := len((&Entry{HasData: true}).AppendTo(nil)); n != emptyEntryLen+4 {
		t.Errorf("an empty Entry with an empty inlined file is %d bytes, want %d", n, emptyEntryLen+4)
	}
	// The bound is exact: every field at its longest. Decoders do not judge that a symlink
	// carries no data, so the longest encodable Entry has both.
	e := linkEntry(strings.Repeat("l", MaxNameLen), strings.Repeat("t", MaxPathLen))
	e.HasData, e.Data = true, make([]byte, MaxInline)
	if n := len(e.AppendTo(nil)); n != MaxEntryLen {
		t.Errorf("the largest Entry is %d bytes, MaxEntryLen %d", n, MaxEntryLen)
	}
	if err := new(Entry).Decode(e.AppendTo(nil)); err != nil {
		t.Errorf("the largest Entry does not decode: %v", err)
	}
	if MaxEntryLen >= MaxFrameLen-4 {
		t.Errorf("MaxEntryLen %d leaves no room for a batch in a frame", MaxEntryLen)
	}
}

// A count the payload cannot hold must fail before anything is allocated for it: otherwise a
// four-byte READDIR reply claiming 2^32-1 entries asks the runtime for 2^32 Entry values.
func TestListCountsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation figures are meaningless under -race")
	}
	cases := []struct {
		name string
		m    message
		body []byte
	}{
		{"entries 65536 in 4 bytes", &Entries{}, binary.BigEndian.AppendUint32(nil, 1<<16)},
		{"entries 65536 in one entry", &Entries{}, (&Entries{List: []Entry{fileEntry("name")}}).AppendTo(nil)},
		{"shares 65535 in 2 bytes", &Shares{}, binary.BigEndian.AppendUint16(nil, 0xFFFF)},
		{"xattr names 65535 in 2 bytes", &XattrNames{}, binary.BigEndian.AppendUint16(nil, 0xFFFF)},
		{"events 2^32-1 in 4 bytes", &Events{}, binary.BigEndian.AppendUint32(nil, 0xFFFFFFFF)},
	}
	binary.BigEndian.PutUint32(cases[1].body, 1<<16)
	for _, tc := range cases {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err := tc.m.Decode(tc.body)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", tc.name, err)
		}
		// A failed decode may build error text; it must not size anything by the claimed count.
		if n := after.TotalAlloc - before.TotalAlloc; n > 16<<10 {
			t.Errorf("%s: decoding %d bytes allocated %d bytes before failing", tc.name, len(tc.body), n)
		}
	}
	// A count that fits is allocated for exactly, never more than the payload can hold.
	m := Entries{List: []Entry{fileEntry("abcd"), fileEntry("efgh")}}
	var got Entries
	if err := got.Decode(m.AppendTo(nil)); err != nil || cap(got.List) != 2 {
		t.Errorf("2 entries: cap %d, %v", cap(got.List), err)
	}
}

// A SHARES item's flags byte has one defined bit; a decoder that ignores the others accepts
// several encodings of one message, and a later flag would be misread by old peers.
func TestSharesRefusesUnknownFlags(t *testing.T) {
	b := (&Shares{List: []ShareInfo{{Name: "photos", ReadOnly: true}}}).AppendTo(nil)
	for _, flags := range []byte{0x02, 0x03, 0x80, 0xFF} {
		b[len(b)-1] = flags
		var m Shares
		if err := m.Decode(b); err == nil {
			t.Errorf("SHARES item with flags 0x%02X decoded as %+v; bits other than 0x01 are reserved", flags, m.List)
		}
	}
}

func TestNegotiateVersion(t *testing.T) {
	h := func(min, max uint16) Hello { return Hello{MinVersion: min, MaxVersion: max, MaxFrameLen: MaxFrameLen} }
	cases := []struct {
		ours, theirs Hello
		want         uint16 // 0: no common version
	}{
		{h(1, 1), h(1, 1), 1},
		{h(1, 3), h(1, 1), 1},
		{h(1, 3), h(2, 5), 3},
		{h(2, 5), h(1, 3), 3},
		{h(1, 9), h(4, 6), 6},
		{h(4, 4), h(1, 9), 4},
		{h(1, 1), h(2, 2), 0},
		{h(2, 2), h(1, 1), 0},
		{h(3, 4), h(1, 2), 0},
		{h(7, 9), h(1, 1), 0},
	}
	for _, tc := range cases {
		got, err := NegotiateVersion(tc.ours, tc.theirs)
		back, errBack := NegotiateVersion(tc.theirs, tc.ours)
		if (err == nil) != (errBack == nil) || got != back {
			t.Errorf("NegotiateVersion is not symmetric for %d-%d and %d-%d", tc.ours.MinVersion, tc.ours.MaxVersion, tc.theirs.MinVersion, tc.theirs.MaxVersion)
		}
		if tc.want == 0 {
			if err == nil {
				t.Errorf("ours %d-%d, theirs %d-%d: chose %d, want no common version", tc.ours.MinVersion, tc.ours.MaxVersion, tc.theirs.MinVersion, tc.theirs.MaxVersion, got)
			} else if !strings.Contains(err.Error(), "upgrade") {
				t.Errorf("the error does not say what to do: %v", err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ours %d-%d, theirs %d-%d: %d, %v; want %d", tc.ours.MinVersion, tc.ours.MaxVersion, tc.theirs.MinVersion, tc.theirs.MaxVersion, got, err, tc.want)
		}
	}
}

// WRITE's data is not copied: Decode returns a view of the frame after the head, so the owner
// writes straight from the receive buffer.
func TestWriteReq(t *testing.T) {
	head := WriteReq{Share: "inbox", Path: "dir/f", Offset: 1<<40 + 7}
	body := writeBody(head, "payload")
	var m WriteReq
	data, err := m.Decode(body)
	if err != nil || m != head || string(data) != "payload" {
		t.Fatalf("Decode = %+v, %q, %v", m, data, err)
	}
	if &data[0] != &body[len(head.AppendTo(nil))] {
		t.Error("WriteReq.Decode copied the data; it must return a view of the body")
	}
	if data, err := m.Decode(head.AppendTo(nil)); err != nil || len(data) != 0 {
		t.Errorf("WRITE of no bytes = %q, %v; a zero-length write is valid", data, err)
	}
	full := writeBody(head, strings.Repeat("x", MaxChunk))
	if len(full) > MaxFrameLen {
		t.Errorf("a WRITE of MaxChunk with the longest head is %d bytes, over MaxFrameLen", len(full))
	}
	if _, err := m.Decode(append(full, 'x')); !errors.Is(err, ErrMalformed) {
		t.Errorf("WRITE of MaxChunk+1 bytes: %v, want ErrMalformed", err)
	}
	longest := WriteReq{Share: strings.Repeat("s", MaxShareNameLen), Path: strings.Repeat("a/", MaxPathLen/2-1) + "ab"}
	if n := len(writeBody(longest, strings.Repeat("x", MaxChunk))); n > MaxFrameLen {
		t.Errorf("the longest WRITE is %d bytes, over MaxFrameLen %d", n, MaxFrameLen)
	}
	for n := 0; n < len(head.AppendTo(nil)); n++ {
		if _, err := new(WriteReq).Decode(body[:n]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("WRITE head cut to %d bytes: %v, want ErrMalformed", n, err)
		}
	}
}

// Inline data travels only with HasData: Data alone is never sent, and an inlined empty file
// is told apart from an entry without data.
func TestEntryInlineData(t *testing.T) {
	plain := fileEntry("a")
	plain.Data = []byte("not sent")
	var got Entry
	if err := got.Decode(plain.AppendTo(nil)); err != nil || got.HasData || got.Data != nil {
		t.Errorf("Entry with Data but no HasData decoded as HasData %v Data %q, %v", got.HasData, got.Data, err)
	}
	empty := inlineEntry("e", "")
	got = Entry{}
	if err := got.Decode(empty.AppendTo(nil)); err != nil || !got.HasData || len(got.Data) != 0 {
		t.Errorf("inlined empty file decoded as HasData %v Data %q, %v", got.HasData, got.Data, err)
	}
	// The flag byte has two values; anything else is malformed rather than read as "yes".
	f := fileEntry("f")
	b := f.AppendTo(nil)
	for _, flag := range []byte{2, 0x80, 0xFF} {
		b[len(b)-1] = flag
		if err := new(Entry).Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("inline flag 0x%02X: %v, want ErrMalformed", flag, err)
		}
	}
}

// FSYNC's flags byte has one defined bit, like SHARES items'.
func TestFsyncRefusesUnknownFlags(t *testing.T) {
	b := (&FsyncReq{Share: "s", Path: "f", DataOnly: true}).AppendTo(nil)
	for _, flags := range []byte{0x02, 0x03, 0x80, 0xFF} {
		b[len(b)-1] = flags
		if err := new(FsyncReq).Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("FSYNC with flags 0x%02X: %v, want ErrMalformed", flags, err)
		}
	}
}

// Fields of one message that are not part of the encoding never survive a round trip: the
// entry of an event that is not EventChanged is not sent.
func TestEventsEntryOnlyWhenChanged(t *testing.T) {
	m := Events{List: []Event{{Kind: EventRemoved, Path: "a", Entry: fileEntry("x")}, {Kind: EventRescan, Path: "d", Entry: fileEntry("y")}}}
	b := m.AppendTo(nil)
	if want := 4 + 2*(1+2+1); len(b) != want {
		t.Errorf("two events without entries encode to %d bytes, want %d", len(b), want)
	}
	var got Events
	if err := got.Decode(b); err != nil || !reflect.DeepEqual(got.List[0].Entry, Entry{}) || !reflect.DeepEqual(got.List[1].Entry, Entry{}) {
		t.Errorf("decoded %+v, %v", got, err)
	}
}
