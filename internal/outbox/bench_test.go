package outbox

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkAddAndDrain measures ops of 100-byte bodies through Add and Run to an in-memory
// owner that answers at once (rtt0) or after 50 ms (rtt50ms, a WAN's round trip): the log's
// write, its fsync before each batch, the batching and the replies. ops/s counts from the
// first Add until the owner has applied the last op.
func BenchmarkAddAndDrain(b *testing.B) {
	b.Run("rtt0", func(b *testing.B) { benchAddAndDrain(b, 0) })
	b.Run("rtt50ms", func(b *testing.B) { benchAddAndDrain(b, 50*time.Millisecond) })
}

func benchAddAndDrain(b *testing.B, rtt time.Duration) {
	w := newOwner()
	w.discard = true
	w.delay = rtt
	o := openT(b, Options{Dir: b.TempDir()})
	run(b, o, w)
	op := writeOp(strings.Repeat("x", 100))
	b.SetBytes(int64(len(op.AppendTo(nil))))
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		if _, err := o.Add(op); err != nil {
			b.Fatal(err)
		}
	}
	if err := o.WaitApplied(timeout(b), o.Last()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(o.Last())/time.Since(start).Seconds(), "ops/s")
	b.ReportMetric(float64(o.Last())/float64(w.counts().calls), "ops/APPLY")
}
