// Package stats counts operations on the hot paths without locks: calls, bytes and the
// smallest, average and largest request size per operation, how long calls took (a total and
// a fixed-bucket histogram), plus named counters (cache hits and misses, network round
// trips). It imports nothing of peerfs; "peerfs stats" and the metrics endpoint show it.
package stats

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// LatencyBounds are the upper bounds of an Op's latency buckets; one more bucket takes
// everything slower. They span a page-cache hit answered by the daemon (tens of
// microseconds) to a request waiting out a lost link (seconds), in 1-2.5-5 steps.
var LatencyBounds = [...]time.Duration{
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// Op counts one kind of operation. The zero value is ready; all methods are safe for
// concurrent use and never allocate.
type Op struct {
	calls atomic.Int64
	bytes atomic.Int64
	min   atomic.Int64 // math.MaxInt64 until the first call with a size
	max   atomic.Int64
	nanos atomic.Int64 // total time spent, when recorded
	init  sync.Once
	// latency counts timed calls per bucket: latency[i] those up to LatencyBounds[i], the
	// last one those slower than every bound.
	latency [len(LatencyBounds) + 1]atomic.Int64
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

// AddTime records how long one call took, in nanoseconds: its total and its latency bucket.
func (o *Op) AddTime(ns int64) {
	o.nanos.Add(ns)
	i := 0
	for i < len(LatencyBounds) && ns > int64(LatencyBounds[i]) {
		i++
	}
	o.latency[i].Add(1)
}

// Snapshot is an Op's counters at one moment.
type Snapshot struct {
	Name   string  `json:"name"`
	Calls  int64   `json:"calls"`
	Bytes  int64   `json:"bytes"`
	Min    int64   `json:"min_bytes"`
	Avg    float64 `json:"avg_bytes"`
	Max    int64   `json:"max_bytes"`
	Millis float64 `json:"total_ms,omitempty"`
	// Latency counts the timed calls per bucket of LatencyBounds (the last: slower than
	// all); nil when no call was timed.
	Latency []int64 `json:"latency,omitempty"`
}

func (o *Op) snapshot(name string) Snapshot {
	s := Snapshot{Name: name, Calls: o.calls.Load(), Bytes: o.bytes.Load(), Max: o.max.Load(),
		Millis: float64(o.nanos.Load()) / 1e6}
	if s.Calls > 0 {
		s.Min = o.min.Load()
		s.Avg = float64(s.Bytes) / float64(s.Calls)
	}
	var timed [len(LatencyBounds) + 1]int64
	seen := false
	for i := range o.latency {
		timed[i] = o.latency[i].Load()
		seen = seen || timed[i] != 0
	}
	if seen {
		s.Latency = timed[:]
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
