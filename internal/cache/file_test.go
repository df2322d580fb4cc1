package cache

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

var testKey = Key{Peer: "PEER", Share: "projects", Path: "src/main.go"}

func TestMissingPresent(t *testing.T) {
	const size = 2*cs + cs/2 // chunks 0, 1 and a short chunk 2
	type rs = []Range
	cases := []struct {
		name    string
		size    int64
		written []int64 // chunks written whole
		off, n  int64
		missing rs
		present bool
	}{
		{"nothing cached", size, nil, 0, size, rs{{0, size}}, false},
		{"one byte mid chunk", size, nil, cs / 2, 1, rs{{0, cs}}, false},
		{"one byte of the short chunk", size, nil, 2*cs + 1, 1, rs{{2 * cs, cs / 2}}, false},
		{"chunk edge, before", size, []int64{0}, cs - 1, 1, nil, true},
		{"chunk edge, after", size, []int64{0}, cs, 1, rs{{cs, cs}}, false},
		{"across the edge", size, []int64{0}, cs - 1, 2, rs{{cs, cs}}, false},
		{"hole in the middle", size, []int64{0, 2}, 0, size, rs{{cs, cs}}, false},
		{"runs merged", size, []int64{1}, 0, size, rs{{0, cs}, {2 * cs, cs / 2}}, false},
		{"short last chunk present", size, []int64{2}, 2 * cs, 1 << 30, nil, true},
		{"clipped to size", size, nil, 2 * cs, 1 << 30, rs{{2 * cs, cs / 2}}, false},
		{"all present", size, []int64{0, 1, 2}, 0, size, nil, true},
		{"empty range", size, nil, cs, 0, nil, true},
		{"at the end", size, nil, size, 10, nil, true},
		{"past the end", size, nil, size + cs, 10, nil, true},
		{"negative offset", size, nil, -1, 10, nil, false},
		{"zero-size file", 0, nil, 0, 100, nil, true},
		{"size a chunk multiple", 2 * cs, []int64{0}, 0, 2 * cs, rs{{cs, cs}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := openStore(t, t.TempDir(), 0)
			f := get(t, s, testKey, Version{Size: c.size})
			defer f.Release()
			writeChunks(t, f, c.written...)
			if got := f.Missing(c.off, c.n); !slices.Equal(got, c.missing) {
				t.Errorf("Missing(%d, %d) = %v, want %v", c.off, c.n, got, c.missing)
			}
			if got := f.Present(c.off, c.n); got != c.present {
				t.Errorf("Present(%d, %d) = %v, want %v", c.off, c.n, got, c.present)
			}
			complete := int64(len(c.written)) == numChunks(c.size)
			if f.Complete() != complete {
				t.Errorf("Complete() = %v, want %v", f.Complete(), complete)
			}
		})
	}
}

func TestPartialWrites(t *testing.T) {
	const size = 2*cs + cs/2
	s, _ := openStore(t, t.TempDir(), 0)
	f := get(t, s, testKey, Version{Size: size})
	defer f.Release()

	write := func(off, n int64) {
		t.Helper()
		if m, err := f.WriteAt(pattern(off, n), off); err != nil || int64(m) != n {
			t.Fatalf("WriteAt(%d, %d) = %d, %v", off, n, m, err)
		}
	}
	// Two writes that together fill chunk 0 mark nothing: each alone covers part of it.
	write(0, cs-1)
	write(cs-1, 1)
	if f.Present(0, 1) {
		t.Fatal("chunk 0 present after partial writes")
	}
	if _, err := f.ReadAt(make([]byte, 10), 0); !errors.Is(err, ErrAbsent) {
		t.Fatalf("ReadAt of a partial chunk: %v, want ErrAbsent", err)
	}
	// The short last chunk, written short of the end: not present.
	write(2*cs, cs/2-1)
	if f.Present(2*cs, 1) {
		t.Fatal("last chunk present though not written to the end")
	}
	// From the middle of chunk 0 to the end: chunks 1 and 2 entire, chunk 0 not.
	write(cs/2, size-cs/2)
	if got, want := f.Missing(0, size), []Range{{0, cs}}; !slices.Equal(got, want) {
		t.Fatalf("Missing = %v, want %v", got, want)
	}
	if b, _ := s.Usage(); b != cs+cs/2 {
		t.Fatalf("usage %d, want %d", b, cs+cs/2)
	}
	write(0, cs)
	if !f.Complete() {
		t.Fatal("not complete")
	}
	if b, _ := s.Usage(); b != size {
		t.Fatalf("usage %d, want %d", b, size)
	}

	// Past the end: refused, nothing written.
	if _, err := f.WriteAt(make([]byte, 2), size-1); err == nil {
		t.Fatal("write past the end accepted")
	}
	if _, err := f.WriteAt(make([]byte, 1), -1); err == nil {
		t.Fatal("write at a negative offset accepted")
	}
	if fi, _ := f.OSFile().Stat(); fi.Size() != size {
		t.Fatalf("data file size %d, want %d", fi.Size(), size)
	}
}

func TestReadAt(t *testing.T) {
	const size = 2*cs + cs/2
	s, _ := openStore(t, t.TempDir(), 0)
	f := get(t, s, testKey, Version{Size: size})
	defer f.Release()
	writeChunks(t, f, 0, 2)

	checkRead(t, f, 0, cs)
	checkRead(t, f, 100, 1000)
	if _, err := f.ReadAt(make([]byte, 2), cs-1); !errors.Is(err, ErrAbsent) {
		t.Fatalf("read across into an absent chunk: %v", err)
	}
	// At the end: short read with io.EOF, like *os.File.
	buf := make([]byte, 100)
	n, err := f.ReadAt(buf, size-10)
	if n != 10 || err != io.EOF {
		t.Fatalf("ReadAt at the end = %d, %v", n, err)
	}
	if n, err := f.ReadAt(buf, size); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt past the end = %d, %v", n, err)
	}
	if n, err := f.ReadAt(nil, 0); n != 0 || err != nil {
		t.Fatalf("empty ReadAt = %d, %v", n, err)
	}

	z := get(t, s, Key{Peer: "PEER", Share: "projects", Path: "empty"}, Version{})
	defer z.Release()
	if !z.Complete() || !z.Present(0, 10) || z.Missing(0, 10) != nil {
		t.Fatal("an empty file is not complete")
	}
	if n, err := z.ReadAt(buf, 0); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt of an empty file = %d, %v", n, err)
	}
}

// TestConcurrentFile runs writers and readers on one File: readers read only what is
// present and must always see the right bytes. Run with -race.
func TestConcurrentFile(t *testing.T) {
	const chunks = 64
	const size = chunks*cs - 1000
	s, _ := openStore(t, t.TempDir(), 0)
	f := get(t, s, testKey, Version{Size: size})
	defer f.Release()

	var wg sync.WaitGroup
	// Four writers, each chunk written by two of them, in different orders, and in pieces
	// of half a chunk by a third party (which marks nothing but rewrites the same bytes).
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for _, c := range r.Perm(chunks) {
				if c%4 == w || (c+1)%4 == w {
					off := int64(c) << chunkShift
					n := min(int64(ChunkSize), size-off)
					if _, err := f.WriteAt(pattern(off, n), off); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for off := int64(cs / 4); off+cs/2 <= size; off += cs {
			if _, err := f.WriteAt(pattern(off, cs/2), off); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for r := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			buf := make([]byte, 3*cs)
			var ranges []Range
			for !f.Complete() {
				off := rng.Int64N(size)
				n := min(rng.Int64N(int64(len(buf)))+1, size-off)
				ranges = f.AppendMissing(ranges[:0], off, n)
				if len(ranges) > 0 {
					continue
				}
				m, err := f.ReadAt(buf[:n], off)
				if err != nil && err != io.EOF {
					t.Errorf("ReadAt(%d, %d): %v", off, n, err)
					return
				}
				if want := pattern(off, int64(m)); string(buf[:m]) != string(want) {
					t.Errorf("ReadAt(%d, %d): wrong bytes", off, n)
					return
				}
			}
		})
	}
	wg.Wait()
	if !f.Complete() {
		t.Fatal("not complete")
	}
	checkRead(t, f, 0, size)
	if b, _ := s.Usage(); b != size {
		t.Fatalf("usage %d, want %d", b, size)
	}
}

// TestConcurrentStore churns many keys through Get, WriteAt, ReadAt, Release, Invalidate and
// eviction under a small limit, then checks that the usage count is exact. Run with -race.
func TestConcurrentStore(t *testing.T) {
	s, _ := openStore(t, t.TempDir(), 6*cs)
	chunks := [][]byte{pattern(0, cs), pattern(cs, cs), pattern(2*cs, cs)}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for i := range 200 {
				k := Key{Peer: "p", Share: "s", Path: fmt.Sprintf("d%d/f%d", rng.IntN(3), rng.IntN(8))}
				v := Version{Size: 2*cs + int64(rng.IntN(3)), MtimeNs: int64(rng.IntN(2))}
				f, err := s.Get(k, v)
				if err != nil {
					t.Error(err)
					return
				}
				c := int64(rng.IntN(3))
				off := c << chunkShift
				n := min(int64(cs), v.Size-off)
				if _, err := f.WriteAt(chunks[c][:n], off); err != nil {
					t.Error(err)
				}
				buf := make([]byte, n)
				if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
					t.Error(err)
				}
				switch i % 50 {
				case 7:
					s.Invalidate(k)
				case 13:
					s.InvalidatePrefix("p", "s", "d1")
				case 21:
					s.evict()
				case 33:
					s.flush(flushDue)
				}
				f.Release()
			}
		})
	}
	wg.Wait()

	s.flushMu.Lock() // a background flush pins entries while it saves them
	defer s.flushMu.Unlock()
	s.mu.Lock()
	var sum int64
	for _, e := range s.mu.entries {
		if e.refs != 0 || e.pins != 0 {
			t.Errorf("%v: %d references, %d pins left", e.key, e.refs, e.pins)
		}
		sum += e.charged.Load()
	}
	s.mu.Unlock()
	if b, _ := s.Usage(); b != sum {
		t.Fatalf("usage %d, entries hold %d", b, sum)
	}
}

func TestHotPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	s, _ := openStore(t, t.TempDir(), 0)
	f := get(t, s, testKey, Version{Size: 4 * cs})
	defer f.Release()
	writeChunks(t, f, 0, 1)
	chunk := pattern(2*cs, cs)
	buf := make([]byte, 4096)
	ranges := make([]Range, 0, 4)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := f.ReadAt(buf, 100); err != nil {
			t.Fatal(err)
		}
		if !f.Present(0, 2*cs) {
			t.Fatal("not present")
		}
		if _, err := f.WriteAt(chunk, 2*cs); err != nil {
			t.Fatal(err)
		}
		ranges = f.AppendMissing(ranges[:0], 0, 4*cs)
		_ = f.Complete()
	})
	if allocs != 0 {
		t.Fatalf("hot path allocates: %v per run", allocs)
	}
}
