package cache

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	s := &Store{dir: t.TempDir()}
	k := Key{Peer: "P", Share: "s", Path: "a/b"}
	v := Version{Size: 130*cs + 7, MtimeNs: -5, Ino: 1 << 60}
	e := newEntry(s, hashKey(k), k, v)
	e.bits.setRange(0, 3)
	e.bits.setRange(64, 131) // through the short last chunk
	b := encodeRecord(e, e.bits.snapshot(), 12345)

	d, err := decodeRecord(s, hashKey(k), b)
	if err != nil {
		t.Fatal(err)
	}
	if d.key != k || d.version != v || d.lastUse.Load() != 12345 {
		t.Fatalf("decoded %+v %+v %d", d.key, d.version, d.lastUse.Load())
	}
	if d.present.Load() != 70 || d.charged.Load() != 69*cs+7 {
		t.Fatalf("present %d chunks, %d bytes", d.present.Load(), d.charged.Load())
	}
	if d.bits.nextClear(0, 3) != 3 || d.bits.nextSet(3, 64) != 64 {
		t.Fatal("bitmap differs")
	}
}

// TestRecordRejects feeds records that pass their checksum but say something impossible.
func TestRecordRejects(t *testing.T) {
	s := &Store{dir: t.TempDir()}
	k := Key{Peer: "P", Share: "s", Path: "f"}
	v := Version{Size: 3 * cs}
	e := newEntry(s, hashKey(k), k, v)
	good := encodeRecord(e, e.bits.snapshot(), 1)
	// Field offsets: magic 8, format 4, chunk size 4, size 8.
	resign := func(b []byte) []byte {
		b = b[:len(b)-4]
		return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
	}
	edit := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return resign(b)
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"format", edit(func(b []byte) { b[8] = 9 }), "format"},
		{"chunk size", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[12:], 1<<20) }), "chunk size"},
		{"huge size", edit(func(b []byte) { binary.LittleEndian.PutUint64(b[16:], 1<<62) }), "out of range"},
		{"negative size", edit(func(b []byte) { binary.LittleEndian.PutUint64(b[16:], 1<<63) }), "out of range"},
		{"bits past the end", edit(func(b []byte) { b[len(b)-8-4] |= 1 << 3 }), "past the last chunk"},
		{"short bitmap", resign(append(append([]byte(nil), good[:len(good)-12]...), 0, 0, 0, 0)), "bitmap"},
		{"long key field", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[48:], 1<<30) }), "truncated"},
		{"checksum", append(append([]byte(nil), good[:len(good)-1]...), good[len(good)-1]^1), "checksum"},
	} {
		_, err := decodeRecord(s, hashKey(k), c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %q", c.name, err, c.want)
		}
	}
	if _, err := decodeRecord(s, hashKey(Key{Peer: "other"}), good); err == nil {
		t.Error("a record under another key's name accepted")
	}
}

func TestGetSizeBounds(t *testing.T) {
	st, _ := openStore(t, t.TempDir(), 0)
	for _, size := range []int64{-1, MaxSize + 1} {
		if _, err := st.Get(testKey, Version{Size: size}); err == nil {
			t.Errorf("Get of size %d accepted", size)
		}
	}
}
