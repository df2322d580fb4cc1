package netlab

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// pcapOf builds a little-endian pcap file holding pkts.
func pcapOf(pkts ...[]byte) []byte {
	var b bytes.Buffer
	hdr := make([]byte, 24)
	binary.LittleEndian.PutUint32(hdr, 0xa1b2c3d4)
	b.Write(hdr)
	for _, p := range pkts {
		rec := make([]byte, 16)
		binary.LittleEndian.PutUint32(rec[8:], uint32(len(p)))
		binary.LittleEndian.PutUint32(rec[12:], uint32(len(p)))
		b.Write(rec)
		b.Write(p)
	}
	return b.Bytes()
}

func TestParsePcap(t *testing.T) {
	pkts, err := ParsePcap(pcapOf([]byte("one"), []byte("second packet")))
	if err != nil || len(pkts) != 2 || string(pkts[1]) != "second packet" {
		t.Fatalf("ParsePcap: %q, %v", pkts, err)
	}
	whole := pcapOf([]byte("one"), []byte("second packet"))
	for name, b := range map[string][]byte{
		"empty":          nil,
		"bad magic":      append([]byte{1, 2, 3, 4}, whole[4:]...),
		"cut in header":  whole[:24+10],
		"cut in payload": whole[:len(whole)-3],
	} {
		if _, err := ParsePcap(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
