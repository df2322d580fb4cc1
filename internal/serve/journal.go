package serve

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/peerfs/peerfs/internal/share"
	"github.com/peerfs/peerfs/internal/wire"
)

// JournalStore is the owner's record of the journals that mounts apply to its shares
// (APPLY, apply.go): per share and journal, the number of the last op applied, so that an op
// is applied once however often it is sent, and in order.
//
// Each journal's record is one small file, dir/<share>/<journal>, where <share> is the hex of
// the share name's SHA-256 (any name, a safe file name) and <journal> the journal ID in hex.
// It is rewritten in place (one pwrite of a checksummed record) after each op, without fsync:
// a crash of the owner's process loses none of it, the page cache keeps it. APPLY with SYNC
// flushes the share's file system and then the record. A record that fails its checksum is
// never read as "nothing applied": the journal's APPLYs are refused (EIO) and the log names the
// file. Records unused for journalMaxAge are removed when the store opens.
type JournalStore struct {
	dir string
	log *slog.Logger

	mu       sync.Mutex
	journals map[journalKey]*journal

	// gapWait is how long a batch waits for the batches before it (PROTOCOL.md: 10 s);
	// deadline how long one APPLY applies before it answers what it did. Tests shorten them.
	gapWait, deadline time.Duration
}

// journalMaxAge is how long the record of an unused journal is kept: a mount that has been
// away that long starts a new journal (its own is empty by then, or it resends from 1 and
// its ops fail or conflict, losing nothing).
const journalMaxAge = 30 * 24 * time.Hour

// maxStates bounds the file states remembered per journal (fileStates).
const maxStates = 100_000

type journalKey struct {
	share string
	id    wire.JournalID
}

// NewJournalStore opens (making it if needed) the directory dir of journal records and
// removes the records unused for 30 days.
func NewJournalStore(dir string, log *slog.Logger) (*JournalStore, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal records: %w (check the permissions of the data directory)", err)
	}
	s := &JournalStore{dir: dir, log: log, journals: map[journalKey]*journal{}, gapWait: 10 * time.Second, deadline: 10 * time.Second}
	s.sweep(time.Now().Add(-journalMaxAge))
	return s, nil
}

// sweep removes the records last written before cutoff, and share directories left empty.
func (s *JournalStore) sweep(cutoff time.Time) {
	shares, _ := os.ReadDir(s.dir)
	removed := 0
	for _, sd := range shares {
		if !sd.IsDir() {
			continue
		}
		sdir := filepath.Join(s.dir, sd.Name())
		files, _ := os.ReadDir(sdir)
		left := len(files)
		for _, f := range files {
			fi, err := f.Info()
			if err != nil || !fi.Mode().IsRegular() || !fi.ModTime().Before(cutoff) {
				continue
			}
			if os.Remove(filepath.Join(sdir, f.Name())) == nil {
				removed++
				left--
			}
		}
		if left == 0 {
			os.Remove(sdir)
		}
	}
	if removed > 0 {
		s.log.Info("removed the records of journals unused for 30 days", "count", removed, "dir", s.dir)
	}
}

// journal returns the journal id of the share, reading its record the first time. A damaged
// record is an error, every time it is asked for, until its file is repaired or removed.
func (s *JournalStore) journal(shareName string, id wire.JournalID) (*journal, error) {
	k := journalKey{shareName, id}
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.journals[k]; j != nil {
		return j, nil
	}
	sum := sha256.Sum256([]byte(shareName))
	j := &journal{
		id:       id,
		path:     filepath.Join(s.dir, hex.EncodeToString(sum[:16]), id.String()),
		advanced: make(chan struct{}),
		states:   newFileStates(maxStates),
	}
	if err := j.load(); err != nil {
		s.log.Error("the record of a journal is damaged: its APPLYs are refused until it is repaired; removing the file makes the journal's ops apply again from its first", "file", j.path, "share", shareName, "journal", id, "err", err)
		return nil, err
	}
	s.journals[k] = j
	return j, nil
}

// journal is one journal's state on the owner.
type journal struct {
	id   wire.JournalID
	path string // its record

	// mu lets one APPLY of the journal apply at a time; a batch waiting for earlier ones
	// does not hold it. It guards the fields below, up to seen.
	mu        sync.Mutex
	file      *os.File   // the record, open once written
	dirty     bool       // applied is ahead of the record (its write failed)
	dirSynced bool       // the record's directory entry was flushed
	states    fileStates // what this journal's ops left files in (conflicts)
	touched   map[string]struct{}

	// seen guards applied, durable and advanced, which a waiting batch reads without mu.
	seen     sync.Mutex
	applied  uint64
	durable  uint64
	advanced chan struct{} // closed, and replaced, when applied moves
}

// The record: magic, journal ID, applied, durable, CRC-32C of what precedes.
const (
	recordMagic = "PFJ1"
	recordLen   = 4 + wire.JournalIDLen + 8 + 8 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// load reads the journal's record; none (or an empty file, made just before a crash) is a
// journal with nothing applied.
func (j *journal) load() error {
	b, err := os.ReadFile(j.path)
	switch {
	case errors.Is(err, fs.ErrNotExist), err == nil && len(b) == 0:
		return nil
	case err != nil:
		return fmt.Errorf("journal record %s: %w", j.path, err)
	case len(b) != recordLen:
		return fmt.Errorf("journal record %s is %d bytes, not %d", j.path, len(b), recordLen)
	case string(b[:4]) != recordMagic:
		return fmt.Errorf("journal record %s does not start with %q", j.path, recordMagic)
	case crc32.Checksum(b[:recordLen-4], castagnoli) != binary.BigEndian.Uint32(b[recordLen-4:]):
		return fmt.Errorf("journal record %s fails its checksum", j.path)
	case [wire.JournalIDLen]byte(b[4:20]) != j.id:
		return fmt.Errorf("journal record %s belongs to another journal", j.path)
	}
	j.applied = binary.BigEndian.Uint64(b[20:])
	j.durable = binary.BigEndian.Uint64(b[28:])
	if j.durable > j.applied {
		return fmt.Errorf("journal record %s says more is durable (%d) than applied (%d)", j.path, j.durable, j.applied)
	}
	return nil
}

// record writes applied and durable to the record in place; mu held.
func (j *journal) record() error {
	if j.file == nil {
		if err := os.MkdirAll(filepath.Dir(j.path), 0o700); err != nil {
			j.dirty = true
			return &recordError{j.path, err}
		}
		f, err := os.OpenFile(j.path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			j.dirty = true
			return &recordError{j.path, err}
		}
		j.file = f
	}
	j.seen.Lock()
	applied, durable := j.applied, j.durable
	j.seen.Unlock()
	var b [recordLen]byte
	copy(b[:], recordMagic)
	copy(b[4:], j.id[:])
	binary.BigEndian.PutUint64(b[20:], applied)
	binary.BigEndian.PutUint64(b[28:], durable)
	binary.BigEndian.PutUint32(b[36:], crc32.Checksum(b[:recordLen-4], castagnoli))
	if _, err := j.file.WriteAt(b[:], 0); err != nil {
		j.dirty = true
		return &recordError{j.path, err}
	}
	j.dirty = false
	return nil
}

// advance records that op seq was applied (mu held) and wakes the batches waiting for it.
func (j *journal) advance(seq uint64) error {
	j.seen.Lock()
	j.applied = seq
	close(j.advanced)
	j.advanced = make(chan struct{})
	j.seen.Unlock()
	return j.record()
}

// marks returns applied and durable.
func (j *journal) marks() (applied, durable uint64) {
	j.seen.Lock()
	defer j.seen.Unlock()
	return j.applied, j.durable
}

// waitFor waits until op seq is applied, for at most d; it reports whether it is.
func (j *journal) waitFor(ctx context.Context, seq uint64, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		j.seen.Lock()
		done, ch := j.applied >= seq, j.advanced
		j.seen.Unlock()
		if done {
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// touch notes a path the journal changed, for a system that flushes file by file
// (syncApplied); mu held.
func (j *journal) touch(paths ...string) {
	if !flushesByFile {
		return
	}
	if j.touched == nil {
		j.touched = map[string]struct{}{}
	}
	for _, p := range paths {
		j.touched[p] = struct{}{}
		j.touched[parentOf(p)] = struct{}{}
	}
}

// sync makes durable everything the journal applied to sh, then its record; mu held.
func (j *journal) sync(sh *share.Share) error {
	applied, durable := j.marks()
	if applied == durable && !j.dirty {
		return nil
	}
	if err := syncApplied(sh, j.touched); err != nil {
		return err
	}
	j.touched = nil
	j.seen.Lock()
	old := j.durable
	j.durable = applied
	j.seen.Unlock()
	err := j.record()
	if err == nil {
		err = j.file.Sync()
	}
	if err == nil && !j.dirSynced {
		err = syncDir(filepath.Dir(j.path))
		if err == nil {
			err = syncDir(filepath.Dir(filepath.Dir(j.path)))
		}
		j.dirSynced = err == nil
	}
	if err != nil {
		j.seen.Lock()
		j.durable = old
		j.seen.Unlock()
		j.dirty = true
		return &recordError{j.path, err}
	}
	return nil
}

// recordError is a failure to write or flush a journal's record.
type recordError struct {
	path string
	err  error
}

func (e *recordError) Error() string { return "journal record " + e.path + ": " + e.err.Error() }
func (e *recordError) Unwrap() error { return e.err }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// parentOf is the directory of a share-relative path ("" for the share root).
func parentOf(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return ""
}

// fileStates maps a path to the state the journal's last op on it left it in, for the
// conflict check (PROTOCOL.md, APPLY, Conflicts). It holds at most max paths and forgets the
// oldest first: an op on a forgotten path whose Base is older becomes a conflict, which loses
// nothing (the mount keeps both versions).
type fileStates struct {
	max   int
	m     map[string]stateAt
	order []keyAt // paths in the order set, with stale ones (gen no longer current)
	gen   uint64
}

type stateAt struct {
	st  wire.FileState
	gen uint64
}

type keyAt struct {
	path string
	gen  uint64
}

func newFileStates(max int) fileStates { return fileStates{max: max, m: map[string]stateAt{}} }

func (f *fileStates) get(path string) (wire.FileState, bool) {
	s, ok := f.m[path]
	return s.st, ok
}

func (f *fileStates) set(path string, st wire.FileState) {
	f.gen++
	f.m[path] = stateAt{st, f.gen}
	f.order = append(f.order, keyAt{path, f.gen})
	for len(f.m) > f.max {
		k := f.order[0]
		f.order = f.order[1:]
		if f.m[k.path].gen == k.gen {
			delete(f.m, k.path)
		}
	}
	if len(f.order) > 2*f.max+1024 { // mostly stale: keep the current ones, in order
		live := make([]keyAt, 0, len(f.m))
		for _, k := range f.order {
			if f.m[k.path].gen == k.gen {
				live = append(live, k)
			}
		}
		f.order = live
	}
}

func (f *fileStates) drop(path string) { delete(f.m, path) }

// move renames from to to, and everything under from (a directory) with it.
func (f *fileStates) move(from, to string) {
	if s, ok := f.m[from]; ok {
		delete(f.m, from)
		f.set(to, s.st)
	}
	prefix := from + "/"
	var under []string
	for p := range f.m {
		if strings.HasPrefix(p, prefix) {
			under = append(under, p)
		}
	}
	for _, p := range under {
		s := f.m[p]
		delete(f.m, p)
		f.set(to+"/"+p[len(prefix):], s.st)
	}
}
