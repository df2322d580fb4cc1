package cache

import (
	"fmt"
	"testing"
)

const cs = ChunkSize

func TestNumChunks(t *testing.T) {
	for _, c := range []struct{ size, want int64 }{
		{0, 0}, {1, 1}, {cs - 1, 1}, {cs, 1}, {cs + 1, 2}, {10 * cs, 10}, {10*cs + 5, 11},
	} {
		if got := numChunks(c.size); got != c.want {
			t.Errorf("numChunks(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}

func TestCoveringChunks(t *testing.T) {
	const size = 2*cs + cs/2 // chunks 0, 1 and a short chunk 2
	for _, c := range []struct {
		off, n, size int64
		a, b         int64
	}{
		{0, size, size, 0, 3},
		{0, 1, size, 0, 1},
		{0, cs, size, 0, 1},
		{0, cs + 1, size, 0, 2},
		{cs - 1, 2, size, 0, 2},
		{cs, cs, size, 1, 2},
		{2 * cs, 1 << 40, size, 2, 3}, // clipped to size
		{size - 1, 1, size, 2, 3},
		{size, 1, size, 0, 0},     // at the end
		{size + 5, 1, size, 0, 0}, // past the end
		{cs, 0, size, 0, 0},       // empty
		{0, 100, 0, 0, 0},         // empty file
		{0, 1 << 62, size, 0, 3},  // no overflow
	} {
		a, b := coveringChunks(c.off, c.n, c.size)
		if a >= b {
			a, b = 0, 0
		}
		if a != c.a || b != c.b {
			t.Errorf("coveringChunks(%d, %d, %d) = [%d, %d), want [%d, %d)", c.off, c.n, c.size, a, b, c.a, c.b)
		}
	}
}

func TestFullChunks(t *testing.T) {
	const size = 2*cs + cs/2
	for _, c := range []struct {
		off, n, size int64
		a, b         int64
	}{
		{0, cs, size, 0, 1},
		{0, cs - 1, size, 0, 0},           // one byte short
		{1, cs, size, 0, 0},               // misaligned: covers no chunk entirely
		{1, 2*cs - 1, size, 1, 2},         // ends on a boundary
		{0, size, size, 0, 3},             // the short last chunk counts at the end
		{2 * cs, cs / 2, size, 2, 3},      // the short last chunk alone
		{2 * cs, cs/2 - 1, size, 0, 0},    // short of the end
		{2*cs + 1, cs/2 - 1, size, 0, 0},  // reaches the end but starts inside the chunk
		{cs / 2, size - cs/2, size, 1, 3}, // from mid chunk 0 to the end
		{0, 0, 0, 0, 0},                   // empty file
		{0, 2 * cs, 2 * cs, 0, 2},         // size a multiple of ChunkSize
		{cs, 0, size, 0, 0},               // empty write
		{size, 0, size, 0, 0},             // empty write at the end
		{cs + cs/2, cs / 2, 2 * cs, 0, 0}, // last chunk full-sized, half written
	} {
		a, b := fullChunks(c.off, c.n, c.size)
		if a != c.a || b != c.b {
			t.Errorf("fullChunks(%d, %d, %d) = [%d, %d), want [%d, %d)", c.off, c.n, c.size, a, b, c.a, c.b)
		}
	}
}

func TestBitmap(t *testing.T) {
	for _, n := range []int64{1, 63, 64, 65, 200} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m := newBitmap(n)
			if got := m.nextClear(0, n); got != 0 {
				t.Fatalf("nextClear on empty = %d", got)
			}
			if got := m.nextSet(0, n); got != n {
				t.Fatalf("nextSet on empty = %d", got)
			}
			if added := m.setRange(0, n); added != n {
				t.Fatalf("setRange(0, %d) added %d", n, added)
			}
			if added := m.setRange(0, n); added != 0 {
				t.Fatalf("setting again added %d", added)
			}
			if got := m.nextClear(0, n); got != n {
				t.Fatalf("nextClear on full = %d", got)
			}
			if m.count() != n {
				t.Fatalf("count = %d", m.count())
			}
			if len(m)*64 > int(n) && m.nextSet(n, int64(len(m))*64) != int64(len(m))*64 {
				t.Fatal("bits set past the end")
			}
		})
	}

	m := newBitmap(200)
	// Ranges that start and end inside words and cross word boundaries.
	if added := m.setRange(3, 130); added != 127 {
		t.Fatalf("added %d", added)
	}
	if added := m.setRange(100, 140); added != 10 {
		t.Fatalf("overlapping range added %d", added)
	}
	if !m.set(199) || m.set(199) {
		t.Fatal("set did not report the first setting only")
	}
	for _, c := range []struct{ from, end, clear, set int64 }{
		{0, 200, 0, 3},
		{3, 200, 140, 3},
		{64, 200, 140, 64},
		{140, 200, 140, 199},
		{141, 199, 141, 199},
		{150, 160, 150, 160},
		{10, 20, 20, 10},
	} {
		if got := m.nextClear(c.from, c.end); got != c.clear {
			t.Errorf("nextClear(%d, %d) = %d, want %d", c.from, c.end, got, c.clear)
		}
		if got := m.nextSet(c.from, c.end); got != c.set {
			t.Errorf("nextSet(%d, %d) = %d, want %d", c.from, c.end, got, c.set)
		}
	}
	if got := popcount(m.snapshot()); got != 138 {
		t.Fatalf("popcount = %d, want 138", got)
	}
}
