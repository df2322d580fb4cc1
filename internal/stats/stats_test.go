package stats

import (
	"slices"
	"sync"
	"testing"
	"time"
)

func TestOpCounts(t *testing.T) {
	s := NewSet()
	o := s.Op("write")
	var wg sync.WaitGroup
	for i := 1; i <= 100; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); o.Add(int64(i) * 1024) }()
	}
	wg.Wait()
	s.Counter("hits").Add(3)
	s.Op("idle") // never called: not reported
	r := s.Report()
	if len(r.Ops) != 1 {
		t.Fatalf("ops %+v", r.Ops)
	}
	w := r.Ops[0]
	if w.Calls != 100 || w.Bytes != 5050*1024 || w.Min != 1024 || w.Max != 100*1024 || w.Avg != 50.5*1024 {
		t.Fatalf("write %+v", w)
	}
	if r.Counters["hits"] != 3 {
		t.Fatalf("counters %v", r.Counters)
	}
}

func TestAddDoesNotAllocate(t *testing.T) {
	o := NewSet().Op("read")
	if a := testing.AllocsPerRun(1000, func() { o.Add(4096) }); a != 0 {
		t.Fatalf("%v allocations per Add", a)
	}
}

func TestAddTimeBuckets(t *testing.T) {
	s := NewSet()
	o := s.Op("read")
	o.Add(0)
	o.AddTime(int64(LatencyBounds[0]))                        // on the first bound: first bucket
	o.AddTime(int64(LatencyBounds[0]) + 1)                    // just above it: second
	o.AddTime(int64(time.Millisecond))                        // on a middle bound
	o.AddTime(int64(LatencyBounds[len(LatencyBounds)-1]) * 2) // slower than every bound
	r := s.Report()
	lat := r.Ops[0].Latency
	if len(lat) != len(LatencyBounds)+1 {
		t.Fatalf("%d buckets, want %d", len(lat), len(LatencyBounds)+1)
	}
	want := make([]int64, len(lat))
	want[0], want[1], want[len(want)-1] = 1, 1, 1
	for i, b := range LatencyBounds {
		if b == time.Millisecond {
			want[i] = 1
		}
	}
	if !slices.Equal(lat, want) {
		t.Fatalf("buckets %v, want %v", lat, want)
	}
	total := LatencyBounds[0]*2 + 1 + time.Millisecond + LatencyBounds[len(LatencyBounds)-1]*2
	if got := time.Duration(r.Ops[0].Millis * 1e6); got/time.Microsecond != total/time.Microsecond {
		t.Fatalf("total %v, want %v", got, total)
	}
}

func TestUntimedOpHasNoLatency(t *testing.T) {
	s := NewSet()
	s.Op("lookup").Add(0)
	if lat := s.Report().Ops[0].Latency; lat != nil {
		t.Fatalf("latency %v for an op never timed", lat)
	}
}

func TestAddTimeDoesNotAllocate(t *testing.T) {
	o := NewSet().Op("read")
	if a := testing.AllocsPerRun(1000, func() { o.AddTime(123456) }); a != 0 {
		t.Fatalf("%v allocations per AddTime", a)
	}
}

// BenchmarkAddTimed is what a timed FUSE request adds to its counting: the clock read
// around the call, and AddTime.
func BenchmarkAddTimed(b *testing.B) {
	o := NewSet().Op("read")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			start := time.Now()
			o.Add(4096)
			o.AddTime(int64(time.Since(start)))
		}
	})
}

// BenchmarkAdd is the same without timing, for reference.
func BenchmarkAdd(b *testing.B) {
	o := NewSet().Op("read")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			o.Add(4096)
		}
	})
}
