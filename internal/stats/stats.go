// Package stats counts operations on the hot paths without locks: calls, bytes and the
// smallest, average and largest request size per operation, plus named counters (cache hits
// and misses, network round trips). It imports nothing of peerfs; "peerfs stats" shows it.
package stats

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"
)

// Op counts one kind of operation. The zero value is ready; all methods are safe for
// concurrent use and never allocate.
type Op struct {
	calls atomic.Int64
	bytes atomic.Int64
	min   atomic.Int64 // math.MaxInt64 until the first call with a size
	max   atomic.Int64
	nanos atomic.Int64 // total time spent, when recorded
	init  sync.Once
}

// Add records one call moving n bytes (0 for operations without a size).
func (o *Op) Add(n int64) {
	o.init.Do(func() { o.min.Store(math.MaxInt64) })
	o.calls.Add(1)
	o.bytes.Add(n)
	for v := o.min.Load(); n < v && !o.min.CompareAndSwap(v, n); v = o.min.Load() {
	}
	for v := o.max.Load(); n > v && !o.max.CompareAndSwap(v, n); v = o.max.Load() {
	}
}

// AddTime records time spent in calls, in nanoseconds.
func (o *Op) AddTime(ns int64) { o.nanos.Add(ns) }

// Snapshot is an Op's counters at one moment.
type Snapshot struct {
	Name   string  `json:"name"`
	Calls  int64   `json:"calls"`
	Bytes  int64   `json:"bytes"`
	Min    int64   `json:"min_bytes"`
	Avg    float64 `json:"avg_bytes"`
	Max    int64   `json:"max_bytes"`
	Millis float64 `json:"total_ms,omitempty"`
}

func (o *Op) snapshot(name string) Snapshot {
	s := Snapshot{Name: name, Calls: o.calls.Load(), Bytes: o.bytes.Load(), Max: o.max.Load(),
		Millis: float64(o.nanos.Load()) / 1e6}
	if s.Calls > 0 {
		s.Min = o.min.Load()
		s.Avg = float64(s.Bytes) / float64(s.Calls)
	}
	return s
}

// Set is a named collection of Ops and counters, built once and then only counted into.
type Set struct {
	mu       sync.Mutex
	ops      map[string]*Op
	counters map[string]*atomic.Int64
}

// NewSet returns an empty set.
func NewSet() *Set {
	return &Set{ops: map[string]*Op{}, counters: map[string]*atomic.Int64{}}
}

// Op returns the Op named name, creating it. Callers keep the pointer: lookups are for setup.
func (s *Set) Op(name string) *Op {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.ops[name]
	if o == nil {
		o = new(Op)
		s.ops[name] = o
	}
	return o
}

// Counter returns the counter named name, creating it.
func (s *Set) Counter(name string) *atomic.Int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counters[name]
	if c == nil {
		c = new(atomic.Int64)
		s.counters[name] = c
	}
	return c
}

// Report is a Set's state, ops sorted by name, only those called at least once.
type Report struct {
	Ops      []Snapshot       `json:"ops"`
	Counters map[string]int64 `json:"counters"`
}

// Report snapshots the set.
func (s *Set) Report() Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := Report{Counters: map[string]int64{}}
	for name, o := range s.ops {
		if snap := o.snapshot(name); snap.Calls > 0 {
			r.Ops = append(r.Ops, snap)
		}
	}
	sort.Slice(r.Ops, func(i, j int) bool { return r.Ops[i].Name < r.Ops[j].Name })
	for name, c := range s.counters {
		r.Counters[name] = c.Load()
	}
	return r
}
