package cache

import (
	"math/bits"
	"sync/atomic"
)

// Chunk maths. Chunk i holds bytes [i*ChunkSize, (i+1)*ChunkSize) clipped to the file size;
// every function here returns half-open chunk index ranges [a, b), empty when a >= b.

// numChunks is how many chunks a file of size bytes has; 0 for an empty file.
func numChunks(size int64) int64 {
	return (size + ChunkSize - 1) >> chunkShift
}

// coveringChunks returns the chunks that meet [off, off+n) clipped to size. off and n must be
// non-negative.
func coveringChunks(off, n, size int64) (a, b int64) {
	end := size
	if n < size-off {
		end = off + n
	}
	if off >= end {
		return 0, 0
	}
	return off >> chunkShift, (end-1)>>chunkShift + 1
}

// fullChunks returns the chunks that [off, off+n) covers entirely, where the file's last
// chunk is entire once the range reaches size. The range must lie within [0, size].
func fullChunks(off, n, size int64) (a, b int64) {
	end := off + n
	a = (off + ChunkSize - 1) >> chunkShift
	if end == size {
		b = numChunks(size)
	} else {
		b = end >> chunkShift
	}
	if a >= b {
		return 0, 0
	}
	return a, b
}

// bitmap records which chunks are present, one bit per chunk, bit i%64 of word i/64. Bits
// are only ever set while an entry lives, so readers need no lock: a bit seen set stays set.
// Atomic words rather than a lock so that concurrent readers of one file share cache lines
// read-only (BenchmarkPresentParallel against BenchmarkPresentRWMutexParallel).
type bitmap []atomic.Uint64

func newBitmap(chunks int64) bitmap {
	return make(bitmap, (chunks+63)/64)
}

// set sets bit i and reports whether it was clear.
func (m bitmap) set(i int64) bool {
	mask := uint64(1) << (i & 63)
	return m[i>>6].Or(mask)&mask == 0
}

// setRange sets bits [a, b) and returns how many were clear.
func (m bitmap) setRange(a, b int64) int64 {
	var added int64
	for i := a; i < b; {
		w := i >> 6
		lo := i & 63
		hi := min(b-w<<6, 64)
		mask := ^uint64(0) >> (64 - (hi - lo)) << lo
		old := m[w].Or(mask)
		added += int64(bits.OnesCount64(mask &^ old))
		i = w<<6 + hi
	}
	return added
}

// nextClear returns the first clear bit in [i, end), or end.
func (m bitmap) nextClear(i, end int64) int64 {
	for i < end {
		w := i >> 6
		if x := ^m[w].Load() >> (i & 63); x != 0 {
			return min(i+int64(bits.TrailingZeros64(x)), end)
		}
		i = (w + 1) << 6
	}
	return end
}

// nextSet returns the first set bit in [i, end), or end.
func (m bitmap) nextSet(i, end int64) int64 {
	for i < end {
		w := i >> 6
		if x := m[w].Load() >> (i & 63); x != 0 {
			return min(i+int64(bits.TrailingZeros64(x)), end)
		}
		i = (w + 1) << 6
	}
	return end
}

// count returns how many bits are set.
func (m bitmap) count() int64 {
	var n int64
	for i := range m {
		n += int64(bits.OnesCount64(m[i].Load()))
	}
	return n
}

// snapshot copies the words, for saving.
func (m bitmap) snapshot() []uint64 {
	out := make([]uint64, len(m))
	for i := range m {
		out[i] = m[i].Load()
	}
	return out
}

// popcount counts the bits set in a snapshot.
func popcount(words []uint64) int64 {
	var n int64
	for _, w := range words {
		n += int64(bits.OnesCount64(w))
	}
	return n
}
