// Package cache is the on-disk chunk store behind mounts: file contents fetched from a peer are
// kept here, one sparse data file per cached file version plus a bitmap of the chunks present,
// under a size limit with least-recently-used eviction, and survive daemon restarts.
//
// It sits between fusefs (which reads from it, or hands its data file to the kernel for
// passthrough) and fetch (which fills it). It knows nothing of peers, links or FUSE: a Key names
// a remote file, a Version names its content, and the store never fetches anything itself.
//
// On disk, under Options.Dir:
//
//	lock             flock'd while a Store is open, so two daemons never share a cache
//	data/<h>         the data file: sparse, truncated to Version.Size, chunks at their offsets
//	data/<h>.map     the entry's record: key, version, last use, present-bitmap, CRC-32C
//	data/<h>.tmp     a record being written; renamed over <h>.map when complete
//
// where <h> is the hex SHA-256 of the key, so no name on disk reveals a peer, share or path.
// Directories are 0700, files 0600.
//
// Each entry's record stands alone instead of being a row of one shared index file: a flush
// rewrites only what changed (a record is ~100 bytes plus 512 bytes per GiB of file), and an
// unreadable record costs one file's cache, not all of it.
//
// Crash rule: a chunk is recorded present only after its bytes were written, and a record is
// written only after the data file was synced (fdatasync) and always through temp file and
// rename. The record on disk is therefore at most as new as the data, so after any crash the
// store trusts no more than it was sure of; chunks written after the last save are simply
// fetched again. Data files without a record are discarded at Open.
package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Tuning constants.
const (
	// chunkShift sets ChunkSize, the granularity of the present-bitmap and so the smallest
	// unit fetch asks for. 256 KiB: it divides the kernel's largest FUSE request (1 MiB, the
	// max_read peerfs mounts with), so a full-size read covers whole chunks; in seed 003's
	// table 256 KiB reads are within a few percent of 1 MiB ones sequentially and 5-7x faster
	// than 4 KiB ones randomly; and the bitmap costs 512 bytes per GiB cached. Smaller chunks
	// mean more requests per sequential read, larger ones waste more transfer on a random 4 KiB
	// read (a sqlite page). Changing it discards every cached entry at the next Open (records
	// carry the chunk size they were written with).
	chunkShift = 18
	ChunkSize  = 1 << chunkShift

	// MaxSize is the largest file version the store caches: ext4's largest file (4 KiB
	// blocks), and a bitmap of 8 MiB. Sizes come from the peer; this bounds what one can make
	// us allocate.
	MaxSize = 16 << 40

	// DefaultLimit is the cache size when Options.Limit is 0.
	DefaultLimit = 10 << 30

	// FlushInterval bounds how long present chunks stay unrecorded: an entry that becomes
	// dirty is saved within this time, and at once when its last File is released. A crash
	// loses at most this much cached data (it is fetched again), never trust in absent data.
	FlushInterval = 5 * time.Second

	// lowWaterDiv: once over Limit, eviction frees down to Limit - Limit/lowWaterDiv (95%), so
	// a full cache evicts in batches rather than one file per chunk written.
	lowWaterDiv = 20
	// evictRetry is how long eviction waits before trying again when it could not get under
	// Limit because every remaining entry is referenced.
	evictRetry = time.Second
	// useSaveEvery: a record is rewritten for a newer last use alone (no new chunks) only when
	// it moved this far; LRU order across a restart needs no finer grain, and rewriting a
	// record on every open would cost a write per open. Close saves every change.
	useSaveEvery = int64(10 * time.Minute)
)

// Errors callers branch on.
var (
	// ErrAbsent: ReadAt was asked for bytes whose chunks are not all present. Fetch first.
	ErrAbsent = errors.New("cache: range not present")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("cache: store closed")
	// ErrLocked: another process has the cache directory open.
	ErrLocked = errors.New("cache: directory in use by another process")
)

var (
	errNegativeOffset = errors.New("cache: negative offset")
	errPastEnd        = errors.New("cache: write past the end of the cached version")
)

// Key names a remote file: a path within a peer's share.
type Key struct {
	Peer, Share, Path string
}

// Version names one content of a file; any change in any field means new content.
type Version struct {
	Size    int64
	MtimeNs int64
	Ino     uint64
}

// Range is a byte range of a file.
type Range struct {
	Off, Len int64
}

// Options configure a Store.
type Options struct {
	Dir    string       // created 0700 if missing
	Limit  int64        // bytes of present chunks before eviction; 0 means DefaultLimit
	Logger *slog.Logger // nil: silent
}

// keyHash identifies an entry in memory and, hex encoded, on disk.
type keyHash [sha256.Size]byte

// hashKey is SHA-256 over the length-prefixed fields, so no two keys share an encoding even
// when names contain separators.
func hashKey(k Key) keyHash {
	b := make([]byte, 0, 24+len(k.Peer)+len(k.Share)+len(k.Path))
	for _, s := range [...]string{k.Peer, k.Share, k.Path} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	return sha256.Sum256(b)
}

func (h keyHash) String() string { return hex.EncodeToString(h[:]) }

// Store is the chunk store of one cache directory. All methods are safe for concurrent use.
type Store struct {
	dir   string // Options.Dir/data
	limit int64
	log   *slog.Logger
	lock  *os.File // flock'd Options.Dir/lock

	used atomic.Int64 // bytes of present chunks of live entries; see entry.charge
	// clock is the wall time (ns) of the latest Get or Release: what a read stamps as its
	// entry's last use. time.Now costs ~50 ns on the 2-core test machine, against ~700 ns
	// for a whole 4 KiB pread from the page cache (BenchmarkReadAtBaseline); this load costs
	// ~1 ns. The order is exact but for ties among entries read since the latest Get or
	// Release, and Release stamps the exact time anyway.
	clock atomic.Int64

	mu struct {
		sync.Mutex
		entries map[keyHash]*entry // live entries; dropped ones are only held by their Files
		closed  bool
	}

	// flushMu makes saves run one at a time: each entry has one temp file name, and
	// entry.savedChunks is only touched under it.
	flushMu sync.Mutex

	dirtyKick   chan struct{} // an entry became dirty: flush within FlushInterval
	releaseKick chan struct{} // a last Release left something to save: flush now
	evictKick   chan struct{} // used went over limit
	done        chan struct{} // closed by Close: loops exit
	wg          sync.WaitGroup
}

// Open opens (creating if needed) the cache under o.Dir and loads its entries. Records that
// cannot be trusted are discarded with one log line, never an error: the cache is a cache.
func Open(o Options) (*Store, error) {
	if o.Dir == "" {
		return nil, errors.New("cache: no directory given")
	}
	if o.Limit < 0 {
		return nil, fmt.Errorf("cache: negative limit %d", o.Limit)
	}
	s := &Store{
		dir:         filepath.Join(o.Dir, "data"),
		limit:       o.Limit,
		log:         o.Logger,
		dirtyKick:   make(chan struct{}, 1),
		releaseKick: make(chan struct{}, 1),
		evictKick:   make(chan struct{}, 1),
		done:        make(chan struct{}),
	}
	if s.limit == 0 {
		s.limit = DefaultLimit
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for _, d := range []string{o.Dir, s.dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("cache: creating %s: %w", d, err)
		}
		// An existing directory may have been made with looser modes; cached contents are
		// as private as the share they came from.
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
	}
	lock, err := lockDir(filepath.Join(o.Dir, "lock"))
	if err != nil {
		return nil, err
	}
	s.lock = lock
	entries, err := s.load()
	if err != nil {
		lock.Close()
		return nil, err
	}
	s.mu.entries = entries
	s.wg.Add(2)
	go s.flushLoop()
	go s.evictLoop()
	if s.used.Load() > s.limit {
		kick(s.evictKick)
	}
	return s, nil
}

// Close stops the background work, saves every entry and closes the data files. Files still
// open fail with os.ErrClosed afterwards; their present chunks are saved.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.mu.Unlock()
	close(s.done)
	s.wg.Wait()

	err := s.flush(flushAll)
	s.mu.Lock()
	for _, e := range s.mu.entries {
		if e.refs > 0 {
			// Files still in use read e.file without a lock: leave the pointer, so they get
			// os.ErrClosed; their Release clears it. (No pins: the last flush is over.)
			e.file.Close()
		} else {
			e.closeData()
		}
	}
	s.mu.Unlock()
	if cerr := s.lock.Close(); err == nil {
		err = cerr
	}
	return err
}

// Get opens the cache file of k at version v, creating it (empty) if needed. A cached other
// version of k is dropped first, as by Invalidate. The File holds a reference: call Release.
func (s *Store) Get(k Key, v Version) (*File, error) {
	if v.Size < 0 || v.Size > MaxSize {
		return nil, fmt.Errorf("cache: size %d out of range [0, %d]", v.Size, int64(MaxSize))
	}
	h := hashKey(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	e := s.mu.entries[h]
	if e != nil && e.version != v {
		s.dropLocked(e)
		e = nil
	}
	if e != nil && e.file == nil {
		if err := e.openData(); err != nil {
			// Deleted or resized behind our back: its record cannot be trusted.
			s.log.Warn("cache: entry dropped", "entry", h.String(), "err", err)
			s.dropLocked(e)
			e = nil
		}
	}
	if e == nil {
		var err error
		if e, err = s.create(h, k, v); err != nil {
			return nil, err
		}
		s.mu.entries[h] = e
	}
	e.refs++
	e.lastUse.Store(s.tick())
	return &File{e: e}, nil
}

// create makes a new, empty entry with its data file. Called with s.mu held, which orders it
// after the removal of any earlier entry's files of the same name.
func (s *Store) create(h keyHash, k Key, v Version) (*entry, error) {
	e := newEntry(s, h, k, v)
	// A record left behind by a failed removal would describe other content under this
	// name after a crash: it must be gone before any new data is written.
	if err := os.Remove(e.recordPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if err := os.Remove(e.dataPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cache: %w", err)
	}
	f, err := os.OpenFile(e.dataPath(), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrNotExist) {
		// Someone emptied the cache directory under the running daemon (to free space,
		// say): make it again rather than fail every open until a restart.
		if err = os.MkdirAll(s.dir, 0o700); err == nil {
			s.log.Info("cache: the cache directory was removed; made it again", "dir", s.dir)
			f, err = os.OpenFile(e.dataPath(), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if err := f.Truncate(v.Size); err != nil {
		f.Close()
		os.Remove(e.dataPath())
		return nil, fmt.Errorf("cache: %w", err)
	}
	e.setData(f)
	return e, nil
}

// Invalidate drops whatever is cached for k. Files of k that are open keep working on the
// dropped data but report Stale and are never saved.
func (s *Store) Invalidate(k Key) {
	h := hashKey(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.mu.entries[h]; e != nil {
		s.dropLocked(e)
	}
}

// InvalidatePrefix drops every entry of the share whose path is dirPath or lies below it; ""
// names the share root. Used when a directory was rescanned and any file below may have
// changed unseen.
func (s *Store) InvalidatePrefix(peer, share, dirPath string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.mu.entries {
		k := e.key
		if k.Peer != peer || k.Share != share {
			continue
		}
		if dirPath == "" || k.Path == dirPath ||
			strings.HasPrefix(k.Path, dirPath) && k.Path[len(dirPath)] == '/' {
			s.dropLocked(e)
		}
	}
}

// Usage reports the bytes of present chunks (the last partial chunk of a file counts its
// real length) and the number of entries.
func (s *Store) Usage() (bytes int64, files int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used.Load(), len(s.mu.entries)
}

// Limit is the bytes of present chunks above which entries are evicted.
func (s *Store) Limit() int64 { return s.limit }

// dropLocked removes e from the store and its files from disk. Open Files keep the data file
// open and see e as stale. Called with s.mu held.
func (s *Store) dropLocked(e *entry) {
	delete(s.mu.entries, e.hash)
	// Under saveMu, so a save in progress sees stale before it renames its record in place.
	e.saveMu.Lock()
	e.stale.Store(true)
	e.saveMu.Unlock()
	for _, p := range []string{e.recordPath(), e.dataPath()} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("cache: removing dropped entry", "err", err)
		}
	}
	e.detach()
	if e.refs == 0 && e.pins == 0 {
		e.closeData()
	}
}

// tick reads the wall clock into s.clock and returns it.
func (s *Store) tick() int64 {
	now := time.Now().UnixNano()
	s.clock.Store(now)
	return now
}

// releaseLocked drops a File's reference to e. Called with s.mu held.
func (s *Store) releaseLocked(e *entry) {
	e.lastUse.Store(s.tick())
	e.refs--
	if e.refs > 0 {
		return
	}
	if !e.stale.Load() && (e.dirty.Load() || e.lastUse.Load()-e.savedUse.Load() > useSaveEvery) {
		kick(s.releaseKick)
	}
	s.idleLocked(e)
	if s.used.Load() > s.limit {
		kick(s.evictKick)
	}
}

// unpinLocked drops a save's pin on e. Called with s.mu held.
func (s *Store) unpinLocked(e *entry) {
	e.pins--
	s.idleLocked(e)
}

// idleLocked closes e's data file if nothing uses it and no chunks wait to be recorded (a
// failed save keeps it open for the next try rather than forget what is present). Called
// with s.mu held.
func (s *Store) idleLocked(e *entry) {
	if e.refs == 0 && e.pins == 0 && (e.stale.Load() || !e.dirty.Load()) {
		e.closeData()
	}
}

// kick wakes a loop without blocking; a wake-up already pending covers this one too.
func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
