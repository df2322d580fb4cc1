package wire

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// bodyType returns a zero message of the type a frame with header h carries, or nil when the
// body has no message type: raw bytes (PING, PONG, DATA, a READ or GETXATTR reply, a WRITE
// request, which checkBody splits itself) or empty (CANCEL, a SHARES request, the replies to
// MKDIR, SYMLINK, WATCH, UNLINK, RMDIR, RENAME, SETXATTR, REMOVEXATTR and FSYNC).
func bodyType(h Header) message {
	reply := h.Flags&FlagResponse != 0
	switch h.Op {
	case OpHello:
		return &Hello{}
	case OpClose, OpError:
		return &ErrorMsg{}
	case OpCredit:
		return &Credit{}
	case OpEnd:
		return &StreamEnd{}
	case OpEvents:
		return &Events{}
	case OpShares:
		if reply {
			return &Shares{}
		}
	case OpStat:
		if reply {
			return &Entry{}
		}
		return &PathReq{}
	case OpReadDir:
		if reply {
			return &Entries{}
		}
		return &ReadDirReq{}
	case OpList:
		if reply {
			return &Entries{}
		}
		return &ListReq{}
	case OpRead:
		if !reply {
			return &ReadReq{}
		}
	case OpGet:
		if reply {
			return &Entry{}
		}
		return &GetReq{}
	case OpStream:
		if reply {
			return &Entry{}
		}
		return &StreamReq{}
	case OpStatfs:
		if reply {
			return &Statfs{}
		}
		return &ShareReq{}
	case OpGetXattr:
		if !reply {
			return &XattrReq{}
		}
	case OpListXattr:
		if reply {
			return &XattrNames{}
		}
		return &PathReq{}
	case OpWatch:
		if !reply {
			return &ShareReq{}
		}
	case OpPut:
		if reply {
			return &PutResp{}
		}
		return &PutReq{}
	case OpMkdir:
		if reply {
			return &Entry{}
		}
		return &MkdirReq{}
	case OpSymlink:
		if reply {
			return &Entry{}
		}
		return &SymlinkReq{}
	case OpSetAttr:
		if reply {
			return &ChangeResp{}
		}
		return &SetAttrReq{}
	case OpCreate:
		if reply {
			return &Entry{}
		}
		return &CreateReq{}
	case OpWrite:
		if reply {
			return &ChangeResp{}
		}
	case OpUnlink, OpRmdir:
		if !reply {
			return &PathReq{}
		}
	case OpRename:
		if !reply {
			return &RenameReq{}
		}
	case OpLink:
		if reply {
			return &Entry{}
		}
		return &LinkReq{}
	case OpSetXattr, OpRemoveXattr:
		if !reply {
			return &XattrReq{}
		}
	case OpFallocate:
		if reply {
			return &Entry{}
		}
		return &FallocateReq{}
	case OpFsync:
		if !reply {
			return &FsyncReq{}
		}
	case OpMknod:
		if reply {
			return &Entry{}
		}
		return &MknodReq{}
	case OpApply:
		if reply {
			return &ApplyResp{}
		}
		return &ApplyReq{}
	}
	return nil
}

// FuzzFrame treats its input as frames laid end to end, as they arrive on a link. For each
// complete frame:
//
//   - ParseHeader must not panic, and a header it accepts must re-encode (Header.Put) to the
//     same 12 bytes: reserved bits, unknown flags and lengths are all judged.
//   - The body is decoded with its op's message type (requests and replies differ). A body
//     that decodes must re-encode (AppendTo) to exactly the same bytes: the encoding is
//     canonical, so no two byte strings mean the same message and nothing a peer sends is
//     silently dropped. A body that fails must fail with ErrMalformed or ErrPathRefused.
//   - Lists are never sized past what the payload can hold, decoded or not.
//
// Raw bodies (PING, PONG, a READ or GETXATTR reply) have nothing to decode; DATA is split by
// DataOffset and rebuilt with PutDataOffset, which is canonical by construction (a fixed 8-byte
// offset, then the bytes as they are); a WRITE request is split by WriteReq.Decode into its
// head and raw bytes and must be rebuilt from them. Empty bodies are not decoded by wire; see
// docs/PROTOCOL.md.
func FuzzFrame(f *testing.F) {
	// The seeds are the files in testdata/fuzz/FuzzFrame (see TestFuzzSeedCorpus).
	f.Fuzz(func(t *testing.T, in []byte) {
		for len(in) > 0 {
			h, err := ParseHeader(in)
			if err != nil {
				if len(in) >= HeaderLen && !errors.Is(err, ErrReserved) && !errors.Is(err, ErrUnknownFlags) && !errors.Is(err, ErrFrameTooLong) {
					t.Fatalf("ParseHeader(%x): unclassified error %v", in[:HeaderLen], err)
				}
				return
			}
			var hb [HeaderLen]byte
			h.Put(hb[:])
			if !bytes.Equal(hb[:], in[:HeaderLen]) {
				t.Fatalf("header %x parses as %v, which re-encodes as %x", in[:HeaderLen], h, hb)
			}
			in = in[HeaderLen:]
			if uint64(h.Len) > uint64(len(in)) {
				return // the rest of the frame has not arrived
			}
			checkBody(t, h, in[:h.Len])
			in = in[h.Len:]
		}
	})
}

func checkBody(t *testing.T, h Header, body []byte) {
	t.Helper()
	if h.Op == OpData {
		off, data, err := DataOffset(body)
		if err != nil {
			if len(body) >= DataHeaderLen || !errors.Is(err, ErrMalformed) {
				t.Fatalf("DataOffset of %d bytes: %v", len(body), err)
			}
			return
		}
		again := append(make([]byte, DataHeaderLen), data...)
		PutDataOffset(again, off)
		if !bytes.Equal(again, body) {
			t.Fatalf("DATA %x re-encodes as %x", body, again)
		}
		return
	}
	if h.Op == OpWrite && h.Flags&FlagResponse == 0 {
		var m WriteReq
		data, err := m.Decode(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrPathRefused) {
				t.Fatalf("%v: WriteReq.Decode(%x): unclassified error %v", h, body, err)
			}
			return
		}
		if len(data) > MaxChunk {
			t.Fatalf("%v: WriteReq.Decode accepted %d bytes of data", h, len(data))
		}
		if again := append(m.AppendTo(nil), data...); !bytes.Equal(again, body) {
			t.Fatalf("%v: WriteReq.Decode accepts a non-canonical body:\n  in  %x\n  out %x", h, body, again)
		}
		return
	}
	m := bodyType(h)
	if m == nil {
		return
	}
	err := m.Decode(body)
	checkListCap(t, h, m, body)
	if err != nil {
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrPathRefused) {
			t.Fatalf("%v: %T.Decode(%x): unclassified error %v", h, m, body, err)
		}
		return
	}
	if again := m.AppendTo(nil); !bytes.Equal(again, body) {
		t.Fatalf("%v: %T.Decode accepts a non-canonical body:\n  in  %x\n  out %x\n  as  %+v", h, m, body, again, m)
	}
}

// checkListCap fails if a list was sized beyond what the body could hold.
func checkListCap(t *testing.T, h Header, m message, body []byte) {
	t.Helper()
	var n, most int
	switch m := m.(type) {
	case *Entries:
		n, most = cap(m.List), len(body)/emptyEntryLen
	case *Shares:
		n, most = cap(m.List), len(body)/4
	case *XattrNames:
		n, most = cap(m.Names), len(body)/3
	case *Events:
		n, most = cap(m.List), len(body)/3
	default:
		return
	}
	if n > most {
		t.Fatalf("%v: %T.Decode of %d bytes made room for %d items; at most %d fit", h, m, len(body), n, most)
	}
}

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the named seed frames in testdata/fuzz/FuzzFrame")

const seedDir = "testdata/fuzz/FuzzFrame"

// readCorpusFile parses a file in the go test fuzz v1 format holding one []byte value.
func readCorpusFile(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" {
		return nil, fmt.Errorf("%s: not a go test fuzz v1 file of one value", path)
	}
	lit, ok := strings.CutPrefix(lines[1], "[]byte(")
	lit, ok2 := strings.CutSuffix(lit, ")")
	if !ok || !ok2 {
		return nil, fmt.Errorf("%s: the value is not a []byte", path)
	}
	s, err := strconv.Unquote(lit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return []byte(s), nil
}

// The named seeds are also the frames of the current protocol version (VersionMax), pinned: if an encoding changes,
// this test fails, and the change must come with a new protocol version (or -update-seeds if
// the change is deliberate and not yet released).
func TestFuzzSeedCorpus(t *testing.T) {
	seeds := seedFrames()
	if *updateSeeds {
		if err := os.MkdirAll(seedDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range seeds {
			content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			if err := os.WriteFile(filepath.Join(seedDir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	covered := map[Op]bool{}
	for name, want := range seeds {
		got, err := readCorpusFile(filepath.Join(seedDir, name))
		if err != nil {
			t.Errorf("seed %s: %v (run go test -run TestFuzzSeedCorpus -update-seeds)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("seed %s no longer matches its encoding:\n file %x\n now  %x", name, got, want)
			continue
		}
		h, err := ParseHeader(got)
		if err != nil || int(h.Len) != len(got)-HeaderLen {
			t.Errorf("seed %s: header %v, %v", name, h, err)
			continue
		}
		if m := bodyType(h); m != nil {
			if err := m.Decode(got[HeaderLen:]); err != nil {
				t.Errorf("seed %s does not decode: %v", name, err)
				continue
			}
		}
		if h.Op == OpWrite && h.Flags&FlagResponse == 0 {
			if _, err := new(WriteReq).Decode(got[HeaderLen:]); err != nil {
				t.Errorf("seed %s does not decode: %v", name, err)
				continue
			}
		}
		covered[h.Op] = true
	}
	for _, op := range Ops() {
		if !covered[op] {
			t.Errorf("no valid seed frame for %v", op)
		}
	}
	// Every body type is seeded, both the request and the reply form of each op that has one.
	types := map[string]bool{}
	for _, s := range samples {
		types[fmt.Sprintf("%T", s.msg)] = true
	}
	for _, op := range Ops() {
		for _, fl := range []Flags{0, FlagResponse} {
			if m := bodyType(Header{Op: op, Flags: fl}); m != nil && !types[fmt.Sprintf("%T", m)] {
				t.Errorf("no sample of %T (%v)", m, op)
			}
		}
	}
	names := make([]string, 0, len(seeds))
	for name := range seeds {
		names = append(names, name)
	}
	if len(names) != len(samples)+len(rawFrames) {
		slices.Sort(names)
		t.Errorf("seed names collide: %v", names)
	}
}
