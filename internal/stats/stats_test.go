package stats

import (
	"sync"
	"testing"
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
