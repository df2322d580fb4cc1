package cache

import (
	"fmt"
	"sync"
	"testing"
)

// benchFile returns a File of chunks chunks, all present.
func benchFile(b *testing.B, chunks int64) *File {
	b.Helper()
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	f, err := s.Get(testKey, Version{Size: chunks * cs})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(f.Release)
	buf := make([]byte, cs)
	for c := range chunks {
		if _, err := f.WriteAt(buf, c*cs); err != nil {
			b.Fatal(err)
		}
	}
	return f
}

func BenchmarkReadAt(b *testing.B) {
	for _, n := range []int{4 << 10, 128 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dK", n>>10), func(b *testing.B) {
			f := benchFile(b, 64)
			buf := make([]byte, n)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			off := int64(0)
			for b.Loop() {
				if _, err := f.ReadAt(buf, off); err != nil {
					b.Fatal(err)
				}
				off = (off + int64(n)) % (64*cs - int64(n))
			}
		})
	}
}

// BenchmarkReadAtBaseline is BenchmarkReadAt/4K straight on the data file: the difference is
// the cache's own cost per read (presence check, last-use touch).
func BenchmarkReadAtBaseline(b *testing.B) {
	f := benchFile(b, 64).OSFile()
	buf := make([]byte, 4<<10)
	b.SetBytes(4 << 10)
	b.ReportAllocs()
	off := int64(0)
	for b.Loop() {
		if _, err := f.ReadAt(buf, off); err != nil {
			b.Fatal(err)
		}
		off = (off + 4<<10) % (64*cs - 4<<10)
	}
}

func BenchmarkReadAtParallel(b *testing.B) {
	f := benchFile(b, 64)
	b.SetBytes(4 << 10)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 4<<10)
		off := int64(0)
		for pb.Next() {
			if _, err := f.ReadAt(buf, off); err != nil {
				b.Fatal(err)
			}
			off = (off + 4<<10) % (64*cs - 4<<10)
		}
	})
}

// BenchmarkWriteAt writes whole chunks over a file, so every write also marks a chunk.
func BenchmarkWriteAt(b *testing.B) {
	const chunks = 256
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	buf := make([]byte, cs)
	b.SetBytes(cs)
	b.ReportAllocs()
	var f *File
	c := int64(chunks)
	for b.Loop() {
		if c == chunks { // a fresh entry, so the bits are new; not timed
			b.StopTimer()
			if f != nil {
				s.Invalidate(testKey)
				f.Release()
			}
			if f, err = s.Get(testKey, Version{Size: chunks * cs}); err != nil {
				b.Fatal(err)
			}
			c = 0
			b.StartTimer()
		}
		if _, err := f.WriteAt(buf, c*cs); err != nil {
			b.Fatal(err)
		}
		c++
	}
	f.Release()
}

func BenchmarkPresent(b *testing.B) {
	f := benchFile(b, 64)
	b.ReportAllocs()
	for b.Loop() {
		if !f.Present(3*cs/2, 1<<20) {
			b.Fatal("absent")
		}
	}
}

func BenchmarkAppendMissing(b *testing.B) {
	f := benchFile(b, 64)
	dst := make([]Range, 0, 8)
	b.ReportAllocs()
	for b.Loop() {
		dst = f.AppendMissing(dst[:0], 0, 64*cs)
	}
}

// The bitmap's alternative, for comparison: plain words under a sync.RWMutex.
type lockedBitmap struct {
	mu    sync.RWMutex
	words []uint64
}

func (m *lockedBitmap) allSet(a, b int64) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for i := a; i < b; i++ {
		if m.words[i>>6]&(1<<(i&63)) == 0 {
			return false
		}
	}
	return true
}

// BenchmarkPresentParallel and BenchmarkPresentRWMutexParallel compare the presence check
// of one file read by every core: atomic words against a read lock.
func BenchmarkPresentParallel(b *testing.B) {
	m := newBitmap(64)
	m.setRange(0, 64)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if m.nextClear(6, 10) != 10 {
				b.Fatal("absent")
			}
		}
	})
}

func BenchmarkPresentRWMutexParallel(b *testing.B) {
	m := &lockedBitmap{words: []uint64{^uint64(0)}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !m.allSet(6, 10) {
				b.Fatal("absent")
			}
		}
	})
}
