package cache

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
)

// An entry's record (data/<h>.map), little-endian:
//
//	magic      8 bytes  "peerfsc\n"
//	format     u32      recordFormat
//	chunkSize  u32      ChunkSize when written; another value discards the entry
//	size       i64      Version.Size
//	mtimeNs    i64      Version.MtimeNs
//	ino        u64      Version.Ino
//	lastUse    i64      wall clock, ns
//	peer       u32 length + bytes
//	share      u32 length + bytes
//	path       u32 length + bytes
//	bitmap     8 bytes per 64 chunks (ceil), bits past the last chunk zero
//	crc        u32      CRC-32C (Castagnoli) of everything before it
//
// The key is stored so that InvalidatePrefix works after a restart; Open checks that it hashes
// to the file's name.
const (
	recordMagic  = "peerfsc\n"
	recordFormat = 1
	// maxKeyField bounds each key string when decoding: far above any real peer ID, share
	// name or path (wire.MaxPathLen), far below anything that could hurt.
	maxKeyField = 1 << 16
)

var (
	errSizeChanged = errors.New("data file size differs from the cached version")
	crcTable       = crc32.MakeTable(crc32.Castagnoli)
)

// encodeRecord builds e's record from a bitmap snapshot and a last-use time.
func encodeRecord(e *entry, words []uint64, lastUse int64) []byte {
	k := e.key
	b := make([]byte, 0, 64+len(k.Peer)+len(k.Share)+len(k.Path)+8*len(words))
	b = append(b, recordMagic...)
	b = binary.LittleEndian.AppendUint32(b, recordFormat)
	b = binary.LittleEndian.AppendUint32(b, ChunkSize)
	b = binary.LittleEndian.AppendUint64(b, uint64(e.version.Size))
	b = binary.LittleEndian.AppendUint64(b, uint64(e.version.MtimeNs))
	b = binary.LittleEndian.AppendUint64(b, e.version.Ino)
	b = binary.LittleEndian.AppendUint64(b, uint64(lastUse))
	for _, s := range [...]string{k.Peer, k.Share, k.Path} {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	for _, w := range words {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// decodeRecord parses a record into a new entry of s named h. The entry's counters are set
// from its bitmap; its data file is not opened.
func decodeRecord(s *Store, h keyHash, b []byte) (*entry, error) {
	if len(b) < len(recordMagic)+4 || string(b[:len(recordMagic)]) != recordMagic {
		return nil, errors.New("not a cache record")
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return nil, errors.New("checksum mismatch")
	}
	r := body[len(recordMagic):]
	u32 := func() uint32 {
		if len(r) < 4 {
			r = nil
			return 0
		}
		v := binary.LittleEndian.Uint32(r)
		r = r[4:]
		return v
	}
	u64 := func() uint64 {
		if len(r) < 8 {
			r = nil
			return 0
		}
		v := binary.LittleEndian.Uint64(r)
		r = r[8:]
		return v
	}
	str := func() (string, bool) {
		n := u32()
		if n > maxKeyField || uint32(len(r)) < n {
			return "", false
		}
		v := string(r[:n])
		r = r[n:]
		return v, true
	}
	if f := u32(); f != recordFormat {
		return nil, fmt.Errorf("format %d, want %d", f, recordFormat)
	}
	if cs := u32(); cs != ChunkSize {
		return nil, fmt.Errorf("chunk size %d, now %d", cs, ChunkSize)
	}
	var v Version
	v.Size = int64(u64())
	v.MtimeNs = int64(u64())
	v.Ino = u64()
	lastUse := int64(u64())
	var k Key
	var ok1, ok2, ok3 bool
	k.Peer, ok1 = str()
	k.Share, ok2 = str()
	k.Path, ok3 = str()
	if !ok1 || !ok2 || !ok3 || r == nil {
		return nil, errors.New("truncated")
	}
	if v.Size < 0 || v.Size > MaxSize {
		return nil, fmt.Errorf("size %d out of range", v.Size)
	}
	if hashKey(k) != h {
		return nil, errors.New("key does not match the file name")
	}
	e := newEntry(s, h, k, v)
	if int64(len(r)) != 8*int64(len(e.bits)) {
		return nil, fmt.Errorf("bitmap of %d bytes for %d chunks", len(r), e.chunks)
	}
	for i := range e.bits {
		e.bits[i].Store(binary.LittleEndian.Uint64(r[8*i:]))
	}
	if e.bits.nextSet(e.chunks, int64(len(e.bits))*64) != int64(len(e.bits))*64 {
		return nil, errors.New("bits set past the last chunk")
	}
	n := e.bits.count()
	bytes := n << chunkShift
	if n > 0 && e.bits.nextSet(e.chunks-1, e.chunks) == e.chunks-1 {
		bytes -= ChunkSize - e.lastChunkLen()
	}
	e.present.Store(n)
	e.savedChunks = n
	e.charged.Store(bytes)
	e.lastUse.Store(lastUse)
	e.savedUse.Store(lastUse)
	return e, nil
}

// load reads every record under s.dir and cleans up: temp files, data files without a record
// (their contents were never recorded present), records without data or that fail to decode.
// Untrustworthy records are removed and reported in one log line.
func (s *Store) load() (map[keyHash]*entry, error) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	data := make(map[string]bool)
	var records []string
	for _, de := range des {
		name := de.Name()
		switch {
		case strings.HasSuffix(name, ".tmp"):
			os.Remove(filepath.Join(s.dir, name))
		case strings.HasSuffix(name, ".map"):
			if _, ok := parseHash(strings.TrimSuffix(name, ".map")); ok {
				records = append(records, strings.TrimSuffix(name, ".map"))
			}
		default:
			data[name] = true
		}
	}

	entries := make(map[keyHash]*entry, len(records))
	var discarded int
	var firstErr error
	for _, name := range records {
		e, err := s.loadRecord(name, data[name])
		if err != nil {
			discarded++
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", name, err)
			}
			os.Remove(filepath.Join(s.dir, name+".map"))
			os.Remove(filepath.Join(s.dir, name))
			continue
		}
		delete(data, name)
		entries[e.hash] = e
		s.used.Add(e.charged.Load())
	}
	orphans := 0
	for name := range data {
		if _, ok := parseHash(name); ok {
			os.Remove(filepath.Join(s.dir, name))
			orphans++
		}
	}
	if discarded > 0 {
		s.log.Warn("cache: discarded unreadable entries", "count", discarded, "first", firstErr)
	}
	s.log.Debug("cache: opened", "entries", len(entries), "bytes", s.used.Load(), "unrecorded", orphans)
	return entries, nil
}

func (s *Store) loadRecord(name string, haveData bool) (*entry, error) {
	h, _ := parseHash(name)
	if !haveData {
		return nil, errors.New("no data file")
	}
	b, err := os.ReadFile(filepath.Join(s.dir, name+".map"))
	if err != nil {
		return nil, err
	}
	return decodeRecord(s, h, b)
}

func parseHash(name string) (keyHash, bool) {
	var h keyHash
	if len(name) != 2*len(h) {
		return h, false
	}
	_, err := hex.Decode(h[:], []byte(name))
	return h, err == nil && name == h.String()
}
