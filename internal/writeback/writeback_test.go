package writeback

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
)

// owner is a fake destination that records what reached it.
type owner struct {
	mu    sync.Mutex
	data  []byte
	calls int
	fail  func(off int64) error
}

func (o *owner) send(_ context.Context, off int64, p []byte) error {
	if o.fail != nil {
		if err := o.fail(off); err != nil {
			return err
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	if need := off + int64(len(p)); int64(len(o.data)) < need {
		o.data = append(o.data, make([]byte, need-int64(len(o.data)))...)
	}
	copy(o.data[off:], p)
	return nil
}

func TestRandomWritesMatchAFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var f File
	var o owner
	want := make([]byte, 8<<20)
	for i := 0; i < 2000; i++ {
		off := rng.IntN(len(want) - 70000)
		n := 1 + rng.IntN(65536)
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		copy(want[off:], p)
		f.Write(p, int64(off))
		if i%500 == 499 {
			if err := f.Flush(context.Background(), FlushOptions{}, o.send); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.Flush(context.Background(), FlushOptions{}, o.send); err != nil {
		t.Fatal(err)
	}
	if f.Dirty() != 0 {
		t.Fatalf("dirty %d after flush", f.Dirty())
	}
	got := o.data
	if len(got) < len(want) {
		got = append(got, make([]byte, len(want)-len(got))...)
	}
	if !bytes.Equal(got[:len(want)], want) {
		t.Fatal("owner's copy differs from the writes")
	}
}

func TestSequentialWritesBatchIntoLargePieces(t *testing.T) {
	var f File
	var o owner
	p := make([]byte, 4096)
	for off := 0; off < 8<<20; off += len(p) {
		f.Write(p, int64(off))
	}
	if f.Dirty() != 8<<20 {
		t.Fatalf("dirty %d", f.Dirty())
	}
	if err := f.Flush(context.Background(), FlushOptions{}, o.send); err != nil {
		t.Fatal(err)
	}
	if o.calls != 8 {
		t.Fatalf("%d WRITEs for 8 MiB of 4 KiB writes, want 8 of 1 MiB", o.calls)
	}
}

func TestFlushErrorKeepsDataAndIsReported(t *testing.T) {
	var f File
	full := errors.New("ENOSPC")
	o := owner{fail: func(off int64) error {
		if off >= 1<<20 {
			return full
		}
		return nil
	}}
	f.Write(make([]byte, 3<<20), 0)
	if err := f.Flush(context.Background(), FlushOptions{}, o.send); !errors.Is(err, full) {
		t.Fatalf("flush error %v", err)
	}
	if f.Dirty() != 2<<20 {
		t.Fatalf("after a failed flush %d bytes dirty, want the 2 MiB that failed", f.Dirty())
	}
	o.fail = nil
	if err := f.Flush(context.Background(), FlushOptions{}, o.send); err != nil {
		t.Fatal(err)
	}
	f.Fail(full)
	if err := f.Err(); !errors.Is(err, full) {
		t.Fatalf("Err = %v", err)
	}
	if err := f.Err(); err != nil {
		t.Fatalf("error reported twice: %v", err)
	}
}

func TestTruncateDropsDirtyTail(t *testing.T) {
	var f File
	var o owner
	f.Write(bytes.Repeat([]byte{1}, 100), 0)
	f.Write(bytes.Repeat([]byte{2}, 100), 200)
	f.Truncate(50)
	if f.Dirty() != 50 {
		t.Fatalf("dirty %d", f.Dirty())
	}
	f.Flush(context.Background(), FlushOptions{}, o.send)
	if len(o.data) != 50 {
		t.Fatalf("owner got %d bytes", len(o.data))
	}
}

// TestFlushStopsAtTheFirstFailure: once a piece fails, the pieces not yet sent stay dirty
// without being tried (each would wait for the same dead owner), and a later flush sends all.
func TestFlushStopsAtTheFirstFailure(t *testing.T) {
	var f File
	var tries int
	gone := errors.New("owner gone")
	o := owner{fail: func(off int64) error { tries++; return gone }}
	f.Write(make([]byte, 10<<20), 0)
	if err := f.Flush(context.Background(), FlushOptions{InFlight: 1}, o.send); !errors.Is(err, gone) {
		t.Fatalf("flush error %v", err)
	}
	if tries != 1 {
		t.Errorf("%d pieces tried after the first failed, want 1", tries)
	}
	if f.Dirty() != 10<<20 {
		t.Fatalf("%d bytes dirty after the failure, want all 10 MiB", f.Dirty())
	}
	o.fail = nil
	if err := f.Flush(context.Background(), FlushOptions{}, o.send); err != nil || len(o.data) != 10<<20 || f.Dirty() != 0 {
		t.Fatalf("flush after recovery: %v, %d bytes at the owner, %d dirty", err, len(o.data), f.Dirty())
	}
}

// A flush with First sends the lowest piece through it first, and only once it succeeded
// the others; when First fails, nothing else is sent and everything stays dirty for the next
// flush.
func TestFlushFirstGoesAloneAndFirst(t *testing.T) {
	var f File
	data := bytes.Repeat([]byte("x"), 5*MaxPiece)
	f.Write(data[:2*MaxPiece], 3*MaxPiece) // written out of order: the lowest comes second
	f.Write(data[:3*MaxPiece], 0)
	var o owner
	var firstDone bool
	var mu sync.Mutex
	var early int
	send := func(ctx context.Context, off int64, p []byte) error {
		mu.Lock()
		if !firstDone {
			early++
		}
		mu.Unlock()
		return o.send(ctx, off, p)
	}
	refuse := errors.New("refused")
	first := func(ctx context.Context, off int64, p []byte) error { return refuse }
	if err := f.Flush(context.Background(), FlushOptions{InFlight: 4, First: first}, send); err != refuse {
		t.Fatalf("Flush with a failing First: %v, want its error", err)
	}
	if o.calls != 0 || f.Dirty() != int64(len(data)) {
		t.Fatalf("after a failed first: %d pieces sent, %d bytes dirty; want 0 and %d", o.calls, f.Dirty(), len(data))
	}
	var firstOff int64 = -1
	first = func(ctx context.Context, off int64, p []byte) error {
		mu.Lock()
		firstOff, firstDone = off, true
		mu.Unlock()
		return o.send(ctx, off, p)
	}
	if err := f.Flush(context.Background(), FlushOptions{InFlight: 4, First: first}, send); err != nil {
		t.Fatal(err)
	}
	if firstOff != 0 || early != 0 || o.calls != 5 || !bytes.Equal(o.data, data) || f.Dirty() != 0 {
		t.Fatalf("first piece at %d, %d pieces before it, %d pieces in all, %d bytes dirty; want 0, 0, 5, 0",
			firstOff, early, o.calls, f.Dirty())
	}
	// Nothing dirty: first is not called.
	first = func(context.Context, int64, []byte) error { t.Error("first called without dirty data"); return nil }
	if err := f.Flush(context.Background(), FlushOptions{InFlight: 4, First: first}, send); err != nil {
		t.Fatal(err)
	}
}

// A flush of full extents only sends those, and leaves the short ones dirty for the flush
// that follows, as a write-behind in the background does while a writer fills its last piece.
func TestFlushFullOnlyLeavesShortExtents(t *testing.T) {
	var f File
	var o owner
	long := bytes.Repeat([]byte{1}, 2*MaxPiece+10)
	short := []byte("tail")
	f.Write(long, 0)
	f.Write(short, 10*MaxPiece)
	if got := f.Full(); got != int64(len(long)) {
		t.Fatalf("Full = %d, want %d", got, len(long))
	}
	if err := f.Flush(context.Background(), FlushOptions{FullOnly: true}, o.send); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(o.data, long) || f.Dirty() != int64(len(short)) {
		t.Fatalf("after a full-only flush: %d bytes at the owner, %d dirty; want %d and %d",
			len(o.data), f.Dirty(), len(long), len(short))
	}
	if err := f.Flush(context.Background(), FlushOptions{}, o.send); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(o.data[10*MaxPiece:], short) || f.Dirty() != 0 {
		t.Fatalf("the short extent did not follow: %d dirty", f.Dirty())
	}
}
