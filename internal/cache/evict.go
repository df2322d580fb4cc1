package cache

import (
	"cmp"
	"slices"
	"time"
)

// evictLoop keeps usage under the limit. It wakes when a write or a Release finds usage over
// the limit; when only referenced entries are left it waits evictRetry before looking again,
// so writes into a cache full of open files do not spin it.
func (s *Store) evictLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.done:
			return
		case <-s.evictKick:
		}
		if n := s.evict(); n > 0 {
			s.log.Debug("cache: evicted", "entries", n)
		}
		if s.used.Load() > s.limit {
			t := time.NewTimer(evictRetry)
			select {
			case <-s.done:
				t.Stop()
				return
			case <-t.C:
				kick(s.evictKick)
			}
		}
	}
}

// evict drops unreferenced entries, least recently used first, until usage is at the low
// water mark, and returns how many it dropped. Referenced entries are never dropped.
func (s *Store) evict() int {
	if s.used.Load() <= s.limit {
		return 0
	}
	type candidate struct {
		e   *entry
		use int64
	}
	s.mu.Lock()
	var cands []candidate
	for _, e := range s.mu.entries {
		if e.refs == 0 {
			cands = append(cands, candidate{e, e.lastUse.Load()})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(a.use, b.use) })

	target := s.limit - s.limit/lowWaterDiv
	n := 0
	for _, c := range cands {
		if s.used.Load() <= target {
			break
		}
		// One entry per lock hold: Get and Release are not held up behind a whole batch of
		// unlinks. An entry used since the snapshot is no longer a candidate.
		s.mu.Lock()
		if s.mu.entries[c.e.hash] == c.e && c.e.refs == 0 && c.e.lastUse.Load() == c.use {
			s.dropLocked(c.e)
			n++
		}
		s.mu.Unlock()
	}
	return n
}
