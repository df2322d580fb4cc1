package wal

import (
	"fmt"
	"testing"
)

// BenchmarkAppend measures Append (one write(2), no fsync) of records of a given size, and
// AppendBatch of 64 small ones. The log is acknowledged every 256 MiB so that the benchmark
// holds at most a few segments on disk.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{100, 1 << 20} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			benchAppend(b, size, 1)
		})
	}
	b.Run("batch64x100B", func(b *testing.B) { benchAppend(b, 100, 64) })
}

func benchAppend(b *testing.B, size, batch int) {
	l, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	recs := make([][]byte, batch)
	for i := range recs {
		recs[i] = make([]byte, size)
	}
	b.SetBytes(int64(size * batch))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if batch == 1 {
			_, err = l.Append(recs[0])
		} else {
			_, err = l.AppendBatch(recs)
		}
		if err != nil {
			b.Fatal(err)
		}
		if l.Pending().Bytes > 256<<20 {
			if err := l.Ack(l.Next() - 1); err != nil {
				b.Fatal(err)
			}
		}
	}
}
