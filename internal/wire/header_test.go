package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// rawHeader builds header bytes field by field, so tests can set what Header.Put never writes.
func rawHeader(length uint32, op, flags, res0, res1 byte, tag uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, length)
	b = append(b, op, flags, res0, res1)
	return binary.BigEndian.AppendUint32(b, tag)
}

func TestParseHeader(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want Header
		err  error // nil: valid
	}{
		{"zero", rawHeader(0, 0, 0, 0, 0, 0), Header{}, nil},
		{"stat request", rawHeader(17, byte(OpStat), 0, 0, 0, 1), Header{Len: 17, Op: OpStat, Tag: 1}, nil},
		{"reply with more", rawHeader(4096, byte(OpReadDir), byte(FlagResponse|FlagMore), 0, 0, 0xFFFFFFFF),
			Header{Len: 4096, Op: OpReadDir, Flags: FlagResponse | FlagMore, Tag: 0xFFFFFFFF}, nil},
		{"longest frame", rawHeader(MaxFrameLen, byte(OpData), byte(FlagResponse), 0, 0, 7),
			Header{Len: MaxFrameLen, Op: OpData, Flags: FlagResponse, Tag: 7}, nil},
		{"unknown op is not judged", rawHeader(0, 0xEE, 0, 0, 0, 3), Header{Op: 0xEE, Tag: 3}, nil},
		{"extra bytes after the header are ignored", append(rawHeader(1, byte(OpPing), 0, 0, 0, 0), 0xAA, 0xBB),
			Header{Len: 1, Op: OpPing}, nil},

		{"reserved high byte", rawHeader(0, byte(OpStat), 0, 1, 0, 1), Header{}, ErrReserved},
		{"reserved low byte", rawHeader(0, byte(OpStat), 0, 0, 0x80, 1), Header{}, ErrReserved},
		{"unknown flag 0x04", rawHeader(0, byte(OpStat), 0x04, 0, 0, 1), Header{}, ErrUnknownFlags},
		{"unknown flag 0x80", rawHeader(0, byte(OpStat), 0x80|byte(FlagResponse), 0, 0, 1), Header{}, ErrUnknownFlags},
		{"one byte too long", rawHeader(MaxFrameLen+1, byte(OpData), 0, 0, 0, 1), Header{}, ErrFrameTooLong},
		{"length all ones", rawHeader(0xFFFFFFFF, byte(OpData), 0, 0, 0, 1), Header{}, ErrFrameTooLong},
		{"empty", nil, Header{}, ErrShortHeader},
		{"eleven bytes", rawHeader(0, byte(OpStat), 0, 0, 0, 1)[:HeaderLen-1], Header{}, ErrShortHeader},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHeader(tc.in)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("ParseHeader(%x) = %v, %v; want %v", tc.in, h, err, tc.err)
				}
				return
			}
			if err != nil || h != tc.want {
				t.Fatalf("ParseHeader(%x) = %v, %v; want %v", tc.in, h, err, tc.want)
			}
		})
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	headers := []Header{
		{},
		{Len: 12, Op: OpHello},
		{Len: PingLen, Op: OpPing},
		{Len: CreditLen, Op: OpCredit, Tag: 42},
		{Len: MaxFrameLen, Op: OpData, Flags: FlagResponse, Tag: 0xFFFFFFFF},
		{Len: 1, Op: OpReadDir, Flags: FlagResponse | FlagMore, Tag: 0x01020304},
	}
	for _, h := range headers {
		// Put must clear the reserved bytes whatever the buffer held before.
		b := bytes.Repeat([]byte{0xFF}, HeaderLen)
		h.Put(b)
		if b[6] != 0 || b[7] != 0 {
			t.Errorf("%v: Put left reserved bytes %x", h, b[6:8])
		}
		got, err := ParseHeader(b)
		if err != nil || got != h {
			t.Errorf("ParseHeader(Put(%v)) = %v, %v", h, got, err)
		}
		want := rawHeader(h.Len, byte(h.Op), byte(h.Flags), 0, 0, h.Tag)
		if !bytes.Equal(b, want) {
			t.Errorf("Put(%v) = %x, want %x (big-endian, field order of the diagram)", h, b, want)
		}
	}
}

func TestHeaderPutParseZeroAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	var b [HeaderLen]byte
	var sink Header
	allocs := testing.AllocsPerRun(1000, func() {
		Header{Len: MaxChunk + DataHeaderLen, Op: OpData, Flags: FlagResponse, Tag: 7}.Put(b[:])
		h, err := ParseHeader(b[:])
		if err != nil {
			panic(err)
		}
		sink = h
	})
	if allocs != 0 {
		t.Fatalf("Header.Put + ParseHeader: %v allocations per frame, want 0", allocs)
	}
	_ = sink
}
