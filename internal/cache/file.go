package cache

import (
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/peerfs/peerfs/internal/prealloc"
)

// The data path of a File, in the order bytes travel:
//
//  1. fusefs asks Missing (or Present) for the range a read needs: atomic loads of bitmap
//     words, no lock;
//  2. fetch fills each missing range with WriteAt: one pwrite into the data file, then an
//     atomic OR of the bits of the chunks the write covered entirely. Readers that see a bit
//     set read after the pwrite returned, so they see its bytes (the page cache is coherent);
//  3. fusefs serves the read with ReadAt (pread after a presence check) or hands Fd to the
//     kernel (ReadResultFd, or passthrough once Complete);
//  4. the first chunk set after a save marks the entry dirty and wakes flushLoop, which
//     records the bitmap within FlushInterval, or at once after the last Release.
//
// Steps 1-3 take no lock, allocate nothing and never log; concurrent readers only load shared
// words, and a reader stores its last-use time only when the store's clock moved.

// entry is one cached file version, shared by all its Files.
type entry struct {
	s       *Store
	id      uint64 // names this copy (File.Copy)
	hash    keyHash
	name    string // hash in hex: the file names on disk
	key     Key
	version Version
	chunks  int64 // number of chunks of version.Size
	bits    bitmap

	// file is the open data file. Set and cleared under s.mu; stable while refs or pins are
	// above 0, so File methods and saves use it without a lock. fd is file.Fd(), taken once.
	file *os.File
	fd   uintptr
	refs int // guarded by s.mu: Files not yet released; eviction waits for 0
	pins int // guarded by s.mu: saves in progress, which keep file open but do not stop eviction

	lastUse  atomic.Int64 // wall clock, ns: LRU order
	savedUse atomic.Int64 // lastUse as last saved
	// savedChunks is the present count in the last saved record; guarded by s.flushMu.
	savedChunks int64
	present     atomic.Int64 // chunks present
	charged     atomic.Int64 // bytes added to s.used; -1 once detached (dropped)
	dirty       atomic.Bool  // chunks set since the last save
	stale       atomic.Bool  // dropped: never saved again

	// saveMu orders a save's rename against drop: once stale is set under it, no record of
	// this entry is renamed into place again.
	saveMu sync.Mutex
}

func newEntry(s *Store, h keyHash, k Key, v Version) *entry {
	chunks := numChunks(v.Size)
	return &entry{
		s:       s,
		id:      copies.Add(1),
		hash:    h,
		name:    h.String(),
		key:     k,
		version: v,
		chunks:  chunks,
		bits:    newBitmap(chunks),
	}
}

func (e *entry) dataPath() string   { return filepath.Join(e.s.dir, e.name) }
func (e *entry) recordPath() string { return filepath.Join(e.s.dir, e.name+".map") }
func (e *entry) tempPath() string   { return filepath.Join(e.s.dir, e.name+".tmp") }

// openData opens the data file of an entry loaded from disk and checks its size.
// Called with s.mu held.
func (e *entry) openData() error {
	f, err := os.OpenFile(e.dataPath(), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() != e.version.Size {
		err = &os.PathError{Op: "open", Path: f.Name(), Err: errSizeChanged}
	}
	if err != nil {
		f.Close()
		return err
	}
	e.setData(f)
	return nil
}

func (e *entry) setData(f *os.File) {
	e.file = f
	e.fd = f.Fd()
}

// closeData closes the data file. Called with s.mu held and no references left (or at Close).
func (e *entry) closeData() {
	if e.file != nil {
		e.file.Close()
		e.file = nil
		e.fd = ^uintptr(0)
	}
}

// lastChunkLen is the length of the file's last chunk, which may be short.
func (e *entry) lastChunkLen() int64 {
	return e.version.Size - (e.chunks-1)<<chunkShift
}

// markPresent records the chunks that [off, off+n) covers entirely, the file's last chunk
// counting as entire when the range reaches the end of the file.
func (e *entry) markPresent(off, n int64) {
	a, b := fullChunks(off, n, e.version.Size)
	if a >= b {
		return
	}
	var added, bytes int64
	if b == e.chunks && e.lastChunkLen() != ChunkSize {
		if e.bits.set(b - 1) {
			added, bytes = 1, e.lastChunkLen()
		}
		b--
	}
	full := e.bits.setRange(a, b)
	added += full
	bytes += full << chunkShift
	if added == 0 {
		return
	}
	e.present.Add(added)
	e.charge(bytes)
	if !e.dirty.Load() && e.dirty.CompareAndSwap(false, true) {
		kick(e.s.dirtyKick)
	}
	if e.s.used.Load() > e.s.limit {
		kick(e.s.evictKick)
	}
}

// charge adds bytes to the store's usage unless e was dropped, in which case its bytes have
// left the store already. charged and s.used change in one order per writer and drop
// subtracts whatever was charged, so the sum stays exact under any interleaving.
func (e *entry) charge(bytes int64) {
	for {
		c := e.charged.Load()
		if c < 0 {
			return
		}
		if e.charged.CompareAndSwap(c, c+bytes) {
			e.s.used.Add(bytes)
			return
		}
	}
}

// detach takes e's bytes out of the store's usage, once.
func (e *entry) detach() {
	if c := e.charged.Swap(-1); c > 0 {
		e.s.used.Add(-c)
	}
}

// touch records a read for LRU order at the store's clock, writing the shared word only when
// the clock moved, so concurrent readers of one file only load it.
func (e *entry) touch() {
	if now := e.s.clock.Load(); e.lastUse.Load() < now {
		e.lastUse.Store(now)
	}
}

// File is one reference to a cached file version, returned by Store.Get. Its methods are safe
// for concurrent use until Release; afterwards none may be called.
type File struct {
	e        *entry
	released atomic.Bool
}

// Version reports the version this File caches.
func (f *File) Version() Version { return f.e.version }

// copies numbers the entries made, for File.Copy.
var copies atomic.Uint64

// Copy names the cached copy f reads and fills: a version dropped (Invalidate) and cached
// again is another copy, filled anew, though its Version is the same. Work that fills a copy
// (a fetch in flight) must be shared only among Files of one copy.
func (f *File) Copy() uint64 { return f.e.id }

// Stale reports whether the entry was dropped (Invalidate, a newer version, eviction cannot
// happen while referenced): the data stays readable through this File but is never saved and
// no new Get returns it.
func (f *File) Stale() bool { return f.e.stale.Load() }

// Complete reports whether every byte of the version is present: the data file can then
// serve reads on its own (passthrough).
func (f *File) Complete() bool { return f.e.present.Load() == f.e.chunks }

// Fd is the data file's descriptor, opened O_RDWR, for fuse.ReadResultFd and passthrough.
// It stays valid until Release; a ReadResultFd must be consumed before then.
func (f *File) Fd() uintptr { return f.e.fd }

// OSFile is the data file itself; same lifetime as Fd. Callers must not close it.
func (f *File) OSFile() *os.File { return f.e.file }

// Present reports whether every chunk meeting [off, off+n), clipped to the file's size, is
// present. An empty range is present; a negative off or n is not.
func (f *File) Present(off, n int64) bool {
	if off < 0 || n < 0 {
		return false
	}
	a, b := coveringChunks(off, n, f.e.version.Size)
	return f.e.bits.nextClear(a, b) == b
}

// Missing lists the chunk-aligned ranges not yet present among the chunks meeting
// [off, off+n), clipped to the file's size, adjacent chunks merged. nil: all present.
func (f *File) Missing(off, n int64) []Range {
	return f.AppendMissing(nil, off, n)
}

// AppendMissing is Missing appending to dst, for callers that reuse a slice.
func (f *File) AppendMissing(dst []Range, off, n int64) []Range {
	if off < 0 || n < 0 {
		return dst
	}
	size := f.e.version.Size
	a, b := coveringChunks(off, n, size)
	for i := a; ; {
		i = f.e.bits.nextClear(i, b)
		if i >= b {
			return dst
		}
		j := f.e.bits.nextSet(i, b)
		start := i << chunkShift
		dst = append(dst, Range{Off: start, Len: min(j<<chunkShift, size) - start})
		i = j
	}
}

// WriteAt writes fetched bytes at off and records as present the chunks it covered entirely
// (the last chunk of the file is entire when the write reaches the end). Bytes of a partly
// covered chunk are written but not trusted until a write covers the whole chunk. A write past
// the version's size is refused.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	e := f.e
	if off < 0 {
		return 0, errNegativeOffset
	}
	if off > e.version.Size || int64(len(p)) > e.version.Size-off {
		return 0, errPastEnd
	}
	n, err := e.file.WriteAt(p, off)
	if n > 0 {
		e.markPresent(off, int64(n))
	}
	return n, err
}

// Reserve reserves disk blocks for [off, off+n) of the data file, for a caller about to write
// the range in order (a sequential stream): ext4 then writes it several times faster. Random
// fetches do not reserve, since blocks reserved but never written would be charged to
// nothing.
func (f *File) Reserve(off, n int64) error {
	e := f.e
	if off < 0 || off >= e.version.Size {
		return nil
	}
	return prealloc.Reserve(e.file, off, min(n, e.version.Size-off))
}

// ReadAt reads cached bytes, with io.ReaderAt's contract (io.EOF past the version's size). It
// fails with ErrAbsent, reading nothing, unless every chunk it would read is present.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	e := f.e
	if off < 0 {
		return 0, errNegativeOffset
	}
	e.touch()
	if len(p) == 0 {
		return 0, nil
	}
	if off >= e.version.Size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), e.version.Size-off)
	a, b := coveringChunks(off, n, e.version.Size)
	if e.bits.nextClear(a, b) != b {
		return 0, ErrAbsent
	}
	m, err := e.file.ReadAt(p[:n], off)
	if err == nil && m < len(p) {
		err = io.EOF
	}
	return m, err
}

// Release drops this File's reference; the last one lets the entry be saved, its data file
// closed and, later, evicted. Releasing twice is harmless.
// Retain returns a second reference to the same cached file, for work that may outlive the
// caller's reference (a background fetch); it must be Released on its own.
func (f *File) Retain() *File {
	s := f.e.s
	s.mu.Lock()
	f.e.refs++
	s.mu.Unlock()
	return &File{e: f.e}
}

func (f *File) Release() {
	if f.released.Swap(true) {
		return
	}
	s := f.e.s
	s.mu.Lock()
	s.releaseLocked(f.e)
	s.mu.Unlock()
}
