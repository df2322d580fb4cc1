package outbox

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkAddAndDrain measures ops of 100-byte bodies through Add and Run to an in-memory
// owner that answers at once: the log's write, its fsync before each batch, the batching and
// the replies. The clock stops once the owner has applied the last op.
func BenchmarkAddAndDrain(b *testing.B) {
	w := newOwner()
	w.discard = true
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
