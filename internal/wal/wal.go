// Package wal is a mount's write-ahead log: opaque records stored durably and in order in one
// directory, numbered by a sequence that never goes back, read by a sender and freed once the
// receiving side acknowledges them. It knows nothing of what the records mean.
//
// # Files
//
// The directory holds segment files and one mark file:
//
//   - NNNNNNNNNNNNNNNN.wal: a segment, named by the seq of its first record in 16 hex digits.
//     It starts with an 8-byte header, the magic "PFWALS" and a version (u16, now 1), followed by
//     records back to back. A new segment starts once the current one has reached
//     Options.SegmentBytes (a batch is never split, so a segment may pass it by one batch).
//   - acked: the acknowledged mark, 20 bytes: the magic "PFWALA", a version (u16, 1), the highest
//     acknowledged seq (u64) and a CRC-32C of the 16 bytes before it (u32). It is replaced
//     atomically (written to acked.tmp, then renamed over).
//
// Every number is little endian. A record is a 24-byte header and the data:
//
//	offset 0   u32  length of data
//	offset 4   u32  CRC-32C (Castagnoli) of bytes 8 to the end of data (seq, time, data)
//	offset 8   u64  seq (the first record ever is 1; seqs are contiguous across segments)
//	offset 16  i64  time the record was appended, Unix nanoseconds
//	offset 24  data
//
// # Durability
//
// Append returns after write(2): a record survives kill -9 of the process, not a power cut;
// Sync makes everything appended durable (fsync of the segment, and of the directory when a
// segment was created since). Rolling over to a new segment first fsyncs the old one, so a
// power cut can only damage the tail of the last segment, which Open treats as torn.
//
// # Replay
//
// Open reads every segment. A record cut short or with a bad checksum at the end of the last
// segment, with no good record after it, is a torn tail (kill -9 or a power cut mid-write): it
// is truncated away, logged once, and appending continues after the last good record. Any other
// damage (in a segment that is not the last, a bad record followed by a good one, a gap in the
// seqs) is corruption: Open returns a *CorruptError and changes nothing.
//
// Records up to the acknowledged mark are never handed out again. Seqs stay monotonic across
// reopen even when every segment was deleted: the mark is fsynced before a segment is deleted.
package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Format constants (the package comment describes the layout).
const (
	segMagic     = "PFWALS"
	markMagic    = "PFWALA"
	version      = 1
	segHeaderLen = 8
	markLen      = 20
	// RecordHeaderLen is the disk overhead of each record besides its data.
	RecordHeaderLen = 24
	// MaxRecordBytes is the largest record data Append accepts; a header claiming more is damage.
	MaxRecordBytes = 1 << 30

	segSuffix = ".wal"
	markName  = "acked"
	markTemp  = "acked.tmp"
)

// Defaults of Options.
const (
	DefaultSegmentBytes = 64 << 20
	DefaultBudgetBytes  = 4 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrFull is returned by Append when the unacknowledged records would pass Options.BudgetBytes.
var ErrFull = errors.New("wal: the log holds its budget of unacknowledged bytes; wait for acknowledgements")

// ErrClosed is returned by any call after Close.
var ErrClosed = errors.New("wal: log closed")

// CorruptError says where a log cannot be read.
type CorruptError struct {
	File   string // path of the damaged file
	Offset int64  // byte offset of the damage in File
	What   string // what is wrong there
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("write-ahead log damaged: %s at byte %d of %s: the records from there on cannot be read "+
		"and may not have reached the owner. Nothing was deleted; copy the directory %s somewhere safe before "+
		"moving it aside to start with an empty log", e.What, e.Offset, e.File, filepath.Dir(e.File))
}

// Options tune a Log; zero values take the defaults.
type Options struct {
	SegmentBytes int64        // a new segment file starts past this size (DefaultSegmentBytes)
	BudgetBytes  int64        // most bytes (headers + data) of unacknowledged records held (DefaultBudgetBytes)
	Logger       *slog.Logger // where a truncated torn tail is reported (slog.Default())
}

// Record is one record handed out by Read. Data is the caller's to keep.
type Record struct {
	Seq  uint64
	Time time.Time
	Data []byte
}

// Stats describes the unacknowledged records.
type Stats struct {
	Records uint64
	Bytes   int64     // headers + data
	Oldest  time.Time // time of the oldest unacknowledged record; zero when there is none
}

// segment is one segment file. first and f never change; size (bytes of whole records, header
// included) grows under Log.mu.
type segment struct {
	first uint64
	path  string
	f     *os.File
	size  int64
}

// pos is where the record seq starts: in segment seg at byte off.
type pos struct {
	seq uint64
	seg *segment
	off int64
}

// Log is an open write-ahead log. Its methods are safe for concurrent use; appends are
// serialised.
//
// Locks, taken in this order: ackMu (one Ack at a time, and the mark file), appendMu (the
// writer: the active segment's end and the append buffer), mu (the shared state below; Read
// holds it shared while it reads, so segments are not closed under it), posMu (the memo).
type Log struct {
	dir  string
	opts Options

	ackMu sync.Mutex

	appendMu sync.Mutex
	buf      []byte

	mu       sync.RWMutex
	closed   bool
	segs     []*segment // in seq order; the last is the active one
	next     uint64     // seq of the next record
	acked    uint64
	ackPos   pos   // first unacknowledged record (or the end of the active segment)
	pending  int64 // bytes of unacknowledged records
	oldest   time.Time
	dirDirty bool          // a segment was created since the directory was last synced
	wake     chan struct{} // closed on the next append; nil when nobody waits

	posMu sync.Mutex
	memo  [16]pos // where recent Reads stopped, to find the next record without a scan
	memoN int
}

// Open opens the log in dir, creating dir if needed, and replays what is there.
func Open(dir string, opts Options) (*Log, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = DefaultSegmentBytes
	}
	if opts.BudgetBytes <= 0 {
		opts.BudgetBytes = DefaultBudgetBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, opts: opts}
	if err := l.replay(); err != nil {
		for _, s := range l.segs {
			s.f.Close()
		}
		return nil, err
	}
	return l, nil
}

// replay reads the mark and the segments and sets the log's state.
func (l *Log) replay() error {
	acked, err := readMark(filepath.Join(l.dir, markName))
	if err != nil {
		return err
	}
	os.Remove(filepath.Join(l.dir, markTemp))
	segs, err := listSegments(l.dir)
	if err != nil {
		return err
	}
	// Segments wholly acknowledged (the next one starts at or before acked+1) are dropped
	// unread: an Ack deleting them was interrupted. The mark is made durable first.
	drop := 0
	for drop+1 < len(segs) && segs[drop+1].first-1 <= acked {
		drop++
	}
	if drop > 0 {
		if err := l.writeMark(acked, true); err != nil {
			return err
		}
		for _, s := range segs[:drop] {
			if err := os.Remove(s.path); err != nil {
				return err
			}
		}
		segs = segs[drop:]
	}
	if len(segs) > 0 && segs[0].first > acked+1 {
		return &CorruptError{File: segs[0].path, What: fmt.Sprintf(
			"records %d to %d are missing (acknowledged up to %d, this segment starts at %d)",
			acked+1, segs[0].first-1, acked, segs[0].first)}
	}
	expect := uint64(0)
	for i, s := range segs {
		if i > 0 && s.first != expect {
			return &CorruptError{File: s.path, What: fmt.Sprintf(
				"seq gap: this segment starts at %d, the one before ends at %d", s.first, expect-1)}
		}
		last := i == len(segs)-1
		flag := os.O_RDONLY
		if last {
			flag = os.O_RDWR
		}
		f, err := os.OpenFile(s.path, flag, 0)
		if err != nil {
			return err
		}
		s.f = f
		l.segs = append(l.segs, s)
		end, n, err := scanSegment(s, last, l.opts.Logger)
		if err != nil {
			return err
		}
		s.size = end
		expect = s.first + n
	}
	if len(segs) == 0 {
		l.next = acked + 1
	} else {
		l.next = expect
	}
	l.acked = acked
	if acked >= l.next {
		// The mark passed the last record that survived (a power cut took records the mark had
		// already covered): everything left is acknowledged, and the seqs go on after the mark.
		if err := l.writeMark(acked, true); err != nil {
			return err
		}
		for _, s := range l.segs {
			s.f.Close()
			if err := os.Remove(s.path); err != nil {
				return err
			}
		}
		l.segs = nil
		l.next = acked + 1
	}
	if len(l.segs) == 0 {
		l.ackPos = pos{seq: l.next}
		return nil
	}
	p, err := l.locate(acked + 1)
	if err != nil {
		return err
	}
	l.ackPos = p
	l.pending = l.bytesFrom(p)
	l.oldest, err = l.timeAt(p)
	return err
}

// listSegments returns the segment files of dir, sorted by first seq (files not open yet).
func listSegments(dir string) ([]*segment, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []*segment
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, segSuffix) {
			continue
		}
		hex := strings.TrimSuffix(name, segSuffix)
		first, err := strconv.ParseUint(hex, 16, 64)
		if err != nil || len(hex) != 16 || first == 0 {
			return nil, &CorruptError{File: filepath.Join(dir, name),
				What: "a segment name must be the 16 hex digits of its first seq"}
		}
		segs = append(segs, &segment{first: first, path: filepath.Join(dir, name)})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].first < segs[j].first })
	return segs, nil
}

func segName(first uint64) string { return fmt.Sprintf("%016x%s", first, segSuffix) }

func segHeader() []byte {
	h := make([]byte, segHeaderLen)
	copy(h, segMagic)
	binary.LittleEndian.PutUint16(h[6:], version)
	return h
}

// scanSegment verifies every record of s and returns the end of its last good record and how
// many records it holds. In the last segment a torn tail is truncated away.
func scanSegment(s *segment, last bool, logger *slog.Logger) (end int64, n uint64, err error) {
	data, err := io.ReadAll(s.f)
	if err != nil {
		return 0, 0, err
	}
	hdr := segHeader()
	if len(data) < segHeaderLen {
		if last && string(data) == string(hdr[:len(data)]) {
			// Cut short while being created: write the header again.
			if err := s.f.Truncate(0); err != nil {
				return 0, 0, err
			}
			if _, err := s.f.WriteAt(hdr, 0); err != nil {
				return 0, 0, err
			}
			return segHeaderLen, 0, nil
		}
		return 0, 0, &CorruptError{File: s.path, What: "segment shorter than its header"}
	}
	if string(data[:6]) != segMagic {
		return 0, 0, &CorruptError{File: s.path, What: "not a write-ahead log segment (bad magic)"}
	}
	if v := binary.LittleEndian.Uint16(data[6:]); v != version {
		return 0, 0, &CorruptError{File: s.path, Offset: 6, What: fmt.Sprintf("segment version %d, this peerfs reads %d", v, version)}
	}
	off := segHeaderLen
	seq := s.first
	for off < len(data) {
		rlen, ok := verify(data[off:], seq)
		if ok {
			off += rlen
			seq++
			continue
		}
		if r, ok := parse(data[off:]); ok && r.seq != seq && isRecord(data[off:], r.seq) {
			return 0, 0, &CorruptError{File: s.path, Offset: int64(off),
				What: fmt.Sprintf("record has seq %d where %d belongs", r.seq, seq)}
		}
		what := "record cut short or with a bad checksum"
		if !last {
			return 0, 0, &CorruptError{File: s.path, Offset: int64(off), What: what + " in a segment that is not the last"}
		}
		if at := goodRecordAfter(data, off, seq); at >= 0 {
			return 0, 0, &CorruptError{File: s.path, Offset: int64(off),
				What: fmt.Sprintf("%s, followed by a good record at byte %d", what, at)}
		}
		logger.Warn("wal: torn tail truncated", "file", s.path, "offset", off, "bytes", len(data)-off, "seq", seq)
		if err := s.f.Truncate(int64(off)); err != nil {
			return 0, 0, err
		}
		break
	}
	return int64(off), seq - s.first, nil
}

// goodRecordAfter looks at every byte after the bad record at off for a record that verifies
// with a seq it could have (at least seq, at most one per header's worth of bytes): one found
// means the damage is not a torn tail. It returns its offset, or -1.
func goodRecordAfter(data []byte, off int, seq uint64) int {
	maxSeq := seq + uint64(len(data)-off)/RecordHeaderLen
	for at := off + 1; at+RecordHeaderLen <= len(data); at++ {
		s := binary.LittleEndian.Uint64(data[at+8:])
		if s < seq || s > maxSeq {
			continue
		}
		if _, ok := verify(data[at:], s); ok {
			return at
		}
	}
	return -1
}

func isRecord(b []byte, seq uint64) bool {
	_, ok := verify(b, seq)
	return ok
}

type header struct {
	length int
	crc    uint32
	seq    uint64
	nanos  int64
}

// parse decodes a record header from b.
func parse(b []byte) (header, bool) {
	if len(b) < RecordHeaderLen {
		return header{}, false
	}
	return header{
		length: int(binary.LittleEndian.Uint32(b)),
		crc:    binary.LittleEndian.Uint32(b[4:]),
		seq:    binary.LittleEndian.Uint64(b[8:]),
		nanos:  int64(binary.LittleEndian.Uint64(b[16:])),
	}, true
}

// verify checks that b starts with the whole record seq, its checksum good, and returns its size.
func verify(b []byte, seq uint64) (int, bool) {
	h, ok := parse(b)
	if !ok || h.seq != seq || h.length > MaxRecordBytes || RecordHeaderLen+h.length > len(b) {
		return 0, false
	}
	n := RecordHeaderLen + h.length
	if crc32.Checksum(b[8:n], castagnoli) != h.crc {
		return 0, false
	}
	return n, true
}

// readMark reads the acknowledged mark; a missing file means nothing was acknowledged.
func readMark(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(b) != markLen || string(b[:6]) != markMagic || binary.LittleEndian.Uint16(b[6:]) != version ||
		crc32.Checksum(b[:16], castagnoli) != binary.LittleEndian.Uint32(b[16:]) {
		return 0, &CorruptError{File: path, What: "bad acknowledged mark"}
	}
	return binary.LittleEndian.Uint64(b[8:]), nil
}

// writeMark replaces the mark file; durable also fsyncs it and the directory (before a
// segment is deleted), otherwise it survives kill -9 but not a power cut.
func (l *Log) writeMark(acked uint64, durable bool) error {
	b := make([]byte, markLen)
	copy(b, markMagic)
	binary.LittleEndian.PutUint16(b[6:], version)
	binary.LittleEndian.PutUint64(b[8:], acked)
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(b[:16], castagnoli))
	tmp := filepath.Join(l.dir, markTemp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(l.dir, markName))
	}
	if err == nil && durable {
		err = syncDir(l.dir)
	}
	return err
}

// Append adds one record and returns its seq once written (write(2), not fsync).
func (l *Log) Append(rec []byte) (uint64, error) {
	return l.AppendBatch([][]byte{rec})
}

// AppendBatch adds several records with one write and returns the seq of the first.
func (l *Log) AppendBatch(recs [][]byte) (uint64, error) {
	need := int64(0)
	for _, r := range recs {
		if len(r) > MaxRecordBytes {
			return 0, fmt.Errorf("wal: record of %d bytes, the most is %d", len(r), MaxRecordBytes)
		}
		need += RecordHeaderLen + int64(len(r))
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()

	l.mu.RLock()
	closed, first, pending := l.closed, l.next, l.pending
	var active *segment
	if len(l.segs) > 0 {
		active = l.segs[len(l.segs)-1]
	}
	l.mu.RUnlock()
	if closed {
		return 0, ErrClosed
	}
	if len(recs) == 0 {
		return first, nil
	}
	if pending+need > l.opts.BudgetBytes {
		return 0, ErrFull
	}
	if active == nil || active.size >= l.opts.SegmentBytes {
		var err error
		if active, err = l.rollover(active, first); err != nil {
			return 0, err
		}
	}

	buf := l.buf[:0]
	now := time.Now()
	for i, r := range recs {
		at := len(buf)
		buf = slices.Grow(buf, RecordHeaderLen+len(r))[:at+RecordHeaderLen]
		binary.LittleEndian.PutUint32(buf[at:], uint32(len(r)))
		binary.LittleEndian.PutUint64(buf[at+8:], first+uint64(i))
		binary.LittleEndian.PutUint64(buf[at+16:], uint64(now.UnixNano()))
		buf = append(buf, r...)
		binary.LittleEndian.PutUint32(buf[at+4:], crc32.Checksum(buf[at+8:], castagnoli))
	}
	if cap(buf) <= 4<<20 { // keep the buffer unless one huge batch grew it
		l.buf = buf
	}
	if _, err := active.f.WriteAt(buf, active.size); err != nil {
		// A part may have reached the file: the next append overwrites it, and replay would
		// drop it as a torn tail.
		active.f.Truncate(active.size)
		return 0, err
	}

	l.mu.Lock()
	active.size += int64(len(buf))
	l.next += uint64(len(recs))
	if l.pending == 0 {
		l.oldest = time.Unix(0, now.UnixNano())
	}
	l.pending += need
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
	l.mu.Unlock()
	return first, nil
}

// rollover fsyncs the full segment old (so a power cut can only tear the last segment) and
// creates the segment that starts at first. Called with appendMu held.
func (l *Log) rollover(old *segment, first uint64) (*segment, error) {
	if old != nil {
		if err := old.f.Sync(); err != nil {
			return nil, err
		}
	}
	path := filepath.Join(l.dir, segName(first))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(segHeader()); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	s := &segment{first: first, path: path, f: f, size: segHeaderLen}
	l.mu.Lock()
	if len(l.segs) == 0 {
		l.ackPos = pos{seq: first, seg: s, off: segHeaderLen}
	}
	l.segs = append(l.segs, s)
	l.dirDirty = true
	l.mu.Unlock()
	return s, nil
}

// Sync makes every record appended so far durable: fsync of the active segment, and of the
// directory when a segment was created since the last Sync.
func (l *Log) Sync() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	var f *os.File
	if len(l.segs) > 0 {
		f = l.segs[len(l.segs)-1].f
	}
	dirty := l.dirDirty
	l.dirDirty = false
	l.mu.Unlock()
	var err error
	if f != nil {
		err = f.Sync()
	}
	if err == nil && dirty {
		err = syncDir(l.dir)
	}
	if err != nil {
		l.mu.Lock()
		l.dirDirty = l.dirDirty || dirty
		l.mu.Unlock()
	}
	return err
}

// Ack records that every record up to seq is applied elsewhere: they are never handed out
// again, and segments holding only such records are deleted (but the active one, until it is
// full and the next segment has started, or the log closes).
func (l *Log) Ack(seq uint64) error {
	l.ackMu.Lock()
	defer l.ackMu.Unlock()

	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	if seq <= l.acked {
		l.mu.RUnlock()
		return nil
	}
	if seq >= l.next {
		next := l.next
		l.mu.RUnlock()
		return fmt.Errorf("wal: acknowledgement of seq %d, but the last record is %d", seq, next-1)
	}
	p, err := l.locate(seq + 1)
	var drop []*segment
	for _, s := range l.segs[:len(l.segs)-1] {
		if s == p.seg {
			break
		}
		drop = append(drop, s)
	}
	l.mu.RUnlock()
	if err != nil {
		return err
	}

	// Nothing else moves the ack position or removes segments while ackMu is held.
	if err := l.writeMark(seq, len(drop) > 0); err != nil {
		return err
	}
	l.mu.Lock()
	l.acked = seq
	l.ackPos = p
	l.segs = l.segs[len(drop):]
	l.pending = l.bytesFrom(p)
	l.oldest, err = l.timeAt(p)
	l.mu.Unlock()

	for _, s := range drop {
		s.f.Close()
		if rerr := os.Remove(s.path); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// Acked returns the highest acknowledged seq (0 when none).
func (l *Log) Acked() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.acked
}

// Next returns the seq the next Append gets.
func (l *Log) Next() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.next
}

// Pending describes the unacknowledged records.
func (l *Log) Pending() Stats {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return Stats{Records: l.next - 1 - l.acked, Bytes: l.pending, Oldest: l.oldest}
}

// Read returns unacknowledged records with seq >= from, in order: at most maxRecords records and, past
// the first, at most maxBytes of data. It returns none when there is no such record yet (see
// Wait). It checks each record's checksum again.
func (l *Log) Read(from uint64, maxRecords, maxBytes int) ([]Record, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, ErrClosed
	}
	if from <= l.acked {
		from = l.acked + 1
	}
	if from >= l.next || maxRecords <= 0 {
		return nil, nil
	}
	p, err := l.locate(from)
	if err != nil {
		return nil, err
	}
	var recs []Record
	total := 0
outer:
	for len(recs) < maxRecords && p.seq < l.next {
		if p.off >= p.seg.size {
			i := slices.Index(l.segs, p.seg)
			if i+1 >= len(l.segs) {
				return nil, &CorruptError{File: p.seg.path, Offset: p.off, What: fmt.Sprintf("record %d missing", p.seq)}
			}
			p = pos{seq: p.seq, seg: l.segs[i+1], off: segHeaderLen}
			continue
		}
		// One read for as many records as maxBytes allows (at least one header).
		n := min(p.seg.size-p.off, int64(max(maxBytes-total, 0))+RecordHeaderLen)
		buf := make([]byte, n)
		if _, err := p.seg.f.ReadAt(buf, p.off); err != nil {
			return nil, err
		}
		at := 0
		for len(recs) < maxRecords && p.seq < l.next {
			h, ok := parse(buf[at:])
			if !ok {
				if at == 0 {
					return nil, &CorruptError{File: p.seg.path, Offset: p.off, What: fmt.Sprintf("record %d missing", p.seq)}
				}
				break
			}
			rlen := RecordHeaderLen + h.length
			if len(recs) > 0 && total+h.length > maxBytes {
				break outer
			}
			rec := buf[at:]
			if rlen > len(rec) {
				if at > 0 {
					break // read it from its start in the next round
				}
				if h.length > MaxRecordBytes || p.off+int64(rlen) > p.seg.size {
					return nil, &CorruptError{File: p.seg.path, Offset: p.off, What: "record length past the segment's end"}
				}
				rec = make([]byte, rlen)
				if _, err := p.seg.f.ReadAt(rec, p.off); err != nil {
					return nil, err
				}
			}
			if _, ok := verify(rec, p.seq); !ok {
				return nil, &CorruptError{File: p.seg.path, Offset: p.off, What: fmt.Sprintf("record %d changed on disk since it was written", p.seq)}
			}
			recs = append(recs, Record{Seq: h.seq, Time: time.Unix(0, h.nanos), Data: rec[RecordHeaderLen:rlen:rlen]})
			total += h.length
			at += rlen
			p.seq++
			p.off += int64(rlen)
			if at >= len(buf) {
				break
			}
		}
	}
	l.remember(p)
	return recs, nil
}

// Wait blocks until the record seq exists, ctx ends or the log closes.
func (l *Log) Wait(ctx context.Context, seq uint64) error {
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return ErrClosed
		}
		if seq < l.next {
			l.mu.Unlock()
			return nil
		}
		if l.wake == nil {
			l.wake = make(chan struct{})
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// Close closes the log's files. A wholly acknowledged active segment is deleted (its mark
// made durable first), so an idle log leaves only the mark behind.
func (l *Log) Close() error {
	l.ackMu.Lock()
	defer l.ackMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.closed = true
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
	var err error
	drop := len(l.segs) > 0 && l.acked+1 == l.next
	if drop {
		if err = l.writeMark(l.acked, true); err != nil {
			drop = false
		}
	}
	for _, s := range l.segs {
		if cerr := s.f.Close(); err == nil {
			err = cerr
		}
		if drop {
			if rerr := os.Remove(s.path); err == nil {
				err = rerr
			}
		}
	}
	l.segs = nil
	return err
}

// locate finds where the record seq (acked < seq <= next) starts, from the nearest known
// position before it in its segment. Called with mu held.
func (l *Log) locate(seq uint64) (pos, error) {
	last := l.segs[len(l.segs)-1]
	if seq == l.next {
		return pos{seq: seq, seg: last, off: last.size}, nil
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].first > seq }) - 1
	if i < 0 {
		return pos{}, fmt.Errorf("wal: record %d is not in the log", seq)
	}
	s := l.segs[i]
	best := pos{seq: s.first, seg: s, off: segHeaderLen}
	consider := func(p pos) {
		if p.seg == s && p.seq <= seq && p.seq > best.seq {
			best = p
		}
	}
	consider(l.ackPos)
	l.posMu.Lock()
	for _, p := range l.memo {
		consider(p)
	}
	l.posMu.Unlock()
	return l.scan(best, seq)
}

// scan walks record headers from p to the record seq, reading 64 KiB at a time and jumping over
// larger data.
func (l *Log) scan(p pos, seq uint64) (pos, error) {
	var buf []byte
	bufOff := int64(0)
	for p.seq < seq {
		if p.off+RecordHeaderLen > p.seg.size {
			return pos{}, &CorruptError{File: p.seg.path, Offset: p.off, What: fmt.Sprintf("record %d missing", p.seq)}
		}
		if p.off < bufOff || p.off+RecordHeaderLen > bufOff+int64(len(buf)) {
			n := min(64<<10, p.seg.size-p.off)
			buf = make([]byte, n)
			if _, err := p.seg.f.ReadAt(buf, p.off); err != nil {
				return pos{}, err
			}
			bufOff = p.off
		}
		h, _ := parse(buf[p.off-bufOff:])
		if h.seq != p.seq {
			return pos{}, &CorruptError{File: p.seg.path, Offset: p.off, What: fmt.Sprintf("record has seq %d where %d belongs", h.seq, p.seq)}
		}
		p.off += RecordHeaderLen + int64(h.length)
		p.seq++
	}
	return p, nil
}

// remember keeps p, where a Read stopped, for the next Read or Ack to start from.
func (l *Log) remember(p pos) {
	l.posMu.Lock()
	l.memo[l.memoN%len(l.memo)] = p
	l.memoN++
	l.posMu.Unlock()
}

// bytesFrom counts the bytes of records from p to the end. Called with mu held.
func (l *Log) bytesFrom(p pos) int64 {
	n := int64(0)
	counting := false
	for _, s := range l.segs {
		switch {
		case s == p.seg:
			counting = true
			n += s.size - p.off
		case counting:
			n += s.size - segHeaderLen
		}
	}
	return n
}

// timeAt returns the time of the record at p, or zero at the end of the log. Called with mu held.
func (l *Log) timeAt(p pos) (time.Time, error) {
	if p.seg == nil || p.off >= p.seg.size {
		return time.Time{}, nil
	}
	var b [RecordHeaderLen]byte
	if _, err := p.seg.f.ReadAt(b[:], p.off); err != nil {
		return time.Time{}, err
	}
	h, _ := parse(b[:])
	return time.Unix(0, h.nanos), nil
}
