package cache

import (
	"errors"
	"fmt"
	"os"
	"time"
)

var errNoData = errors.New("data file not open")

// flushScope says which entries a flush saves.
type flushScope int

const (
	// flushReleased: entries without Files that have something to save, right after a last
	// Release; files still being filled wait for the timer, so a busy fetch is not synced
	// once per Release of some other file.
	flushReleased flushScope = iota
	// flushDue: every entry with new chunks, or whose last use moved past useSaveEvery.
	flushDue
	// flushAll: every change, however small (Close).
	flushAll
)

// flushLoop saves records: within FlushInterval of an entry becoming dirty, and at once when
// a last Release leaves something to save. Saves run one at a time, off every caller's path.
func (s *Store) flushLoop() {
	defer s.wg.Done()
	t := time.NewTimer(FlushInterval)
	t.Stop()
	armed := false
	failing := false // logged once when saves start failing, once when they recover
	for {
		scope := flushReleased
		select {
		case <-s.done:
			t.Stop()
			return
		case <-s.dirtyKick:
			// Armed once per interval, not pushed back by every new dirty entry, so a long
			// stream of fetches still gets saved every FlushInterval.
			if !armed {
				t.Reset(FlushInterval)
				armed = true
			}
			continue
		case <-t.C:
			armed = false
			scope = flushDue
		case <-s.releaseKick:
		}
		err := s.flush(scope)
		switch {
		case err != nil && !failing:
			s.log.Warn("cache: saving records failed; retrying", "every", FlushInterval, "err", err)
		case err == nil && failing:
			s.log.Info("cache: saving records works again")
		}
		failing = err != nil
		if failing && !armed {
			// Failed entries stay dirty without a new kick: retry on the timer.
			t.Reset(FlushInterval)
			armed = true
		}
	}
}

// flush saves the entries of scope that have something to save. Failed entries stay dirty
// for the next round; the error counts them and wraps the first.
func (s *Store) flush(scope flushScope) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	minUse := useSaveEvery
	if scope == flushAll {
		minUse = 0
	}
	s.mu.Lock()
	var todo []*entry
	for _, e := range s.mu.entries {
		if scope == flushReleased && e.refs > 0 {
			continue
		}
		if e.dirty.Load() || e.lastUse.Load()-e.savedUse.Load() > minUse {
			e.pins++ // the data file stays open while saving
			todo = append(todo, e)
		}
	}
	s.mu.Unlock()

	var first error
	failed := 0
	for _, e := range todo {
		if err := s.save(e); err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}

	s.mu.Lock()
	for _, e := range todo {
		s.unpinLocked(e)
	}
	s.mu.Unlock()
	if failed > 0 {
		return fmt.Errorf("%d of %d entries: %w", failed, len(todo), first)
	}
	return nil
}

// save writes e's record: bitmap snapshot, then fdatasync of the data file, then the record
// through a temp file renamed over the old one. Every bit in the snapshot was set after its
// pwrite returned, and the sync follows the snapshot, so the record never claims bytes that a
// crash could lose. Called by flush, under flushMu, with e pinned.
func (s *Store) save(e *entry) error {
	if e.stale.Load() {
		return nil
	}
	dirty := e.dirty.Swap(false) // before the snapshot: a bit set after it dirties e again
	lastUse := e.lastUse.Load()
	words := e.bits.snapshot()
	// dirty alone could miss bits whose writer has not yet marked the entry dirty; the count
	// cannot, since bits are only ever added.
	chunks := popcount(words)
	newBits := dirty || chunks != e.savedChunks
	fail := func(err error) error {
		if newBits {
			e.dirty.Store(true) // keeps the data file open for the next round
		}
		return fmt.Errorf("cache: saving %s: %w", e.name, err)
	}
	if newBits {
		if e.file == nil {
			return fail(errNoData) // cannot happen: new bits come through an open File
		}
		if err := datasync(e.file); err != nil {
			return fail(err)
		}
	}
	tmp := e.tempPath()
	if err := writeFile(tmp, encodeRecord(e, words, lastUse)); err != nil {
		os.Remove(tmp)
		if errors.Is(err, os.ErrNotExist) {
			// The cache directory was removed under the daemon: this entry's data file is
			// gone from the disk, so no record can describe it. Open Files keep reading it;
			// the next Get starts afresh.
			s.mu.Lock()
			if s.mu.entries[e.hash] == e {
				s.dropLocked(e)
			}
			s.mu.Unlock()
			return nil
		}
		return fail(err)
	}
	e.saveMu.Lock()
	defer e.saveMu.Unlock()
	if e.stale.Load() {
		os.Remove(tmp)
		return nil
	}
	if err := os.Rename(tmp, e.recordPath()); err != nil {
		os.Remove(tmp)
		return fail(err)
	}
	e.savedUse.Store(lastUse)
	e.savedChunks = chunks
	return nil
}

// writeFile writes b to a new file of mode 0600. It does not sync: a record torn by a power
// cut fails its checksum at Open and the entry is discarded, which is safe.
func writeFile(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
