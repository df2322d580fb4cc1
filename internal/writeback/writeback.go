// Package writeback holds the data written through a mount until it is sent to the owner:
// per file, a set of dirty extents that is flushed in sorted, large, pipelined batches (many
// WRITE requests in flight, one wait) on fsync, close, a memory threshold or a timer. The
// first error of a flush is kept and reported to the application at its next write, fsync or
// close, never swallowed.
package writeback

import (
	"context"
	"sort"
	"sync"

	"github.com/peerfs/peerfs/internal/wire"
)

// Tuning constants.
const (
	// MaxPiece is the largest single WRITE sent: one wire chunk (1 MiB, the FUSE request size).
	MaxPiece = wire.MaxChunk
	// InFlight is how many WRITE requests a flush keeps in flight: 16 MiB at 1 MiB pieces, which
	// keeps a link busy across a 10 ms round trip at over 1 GiB/s.
	InFlight = 16
)

type extent struct {
	off  int64
	data []byte
}

// File is one file's dirty data. Safe for concurrent use.
type File struct {
	mu      sync.Mutex
	extents []extent // unordered, non-overlapping
	dirty   int64
	err     error // first flush error not yet reported
	flushMu sync.Mutex
}

// Write records p at off, copying it (the caller's buffer is reused after return). Data that
// overlaps earlier dirty data replaces it.
func (f *File) Write(p []byte, off int64) {
	end := off + int64(len(p))
	f.mu.Lock()
	defer f.mu.Unlock()
	// The common case, a sequential writer: extend the extent that ends where p starts.
	for i := range f.extents {
		e := &f.extents[i]
		if e.off+int64(len(e.data)) == off && len(e.data)+len(p) <= MaxPiece && !f.overlapsOther(i, off, end) {
			e.data = append(e.data, p...)
			f.dirty += int64(len(p))
			return
		}
	}
	// Merge every extent that overlaps [off, end) into one; merely adjacent ones stay apart
	// (a flush sends them in order anyway), so large sequential writes are never recopied.
	lo, hi := off, end
	keep := f.extents[:0]
	var merged []extent
	for _, e := range f.extents {
		eEnd := e.off + int64(len(e.data))
		if eEnd <= off || e.off >= end {
			keep = append(keep, e)
			continue
		}
		merged = append(merged, e)
		lo, hi = min(lo, e.off), max(hi, eEnd)
	}
	buf := getBlock(int(hi - lo))
	for _, e := range merged {
		copy(buf[e.off-lo:], e.data)
		f.dirty -= int64(len(e.data))
	}
	copy(buf[off-lo:], p)
	for _, e := range merged {
		putBlock(e.data)
	}
	f.extents = append(keep, extent{off: lo, data: buf})
	f.dirty += hi - lo
}

// blocks recycles extent memory: a block holds up to MaxPiece bytes, so a sequential writer
// fills one in place and a flush gives it back, without allocating or zeroing anything.
var blocks = sync.Pool{New: func() any { b := make([]byte, MaxPiece); return &b }}

// getBlock returns n bytes of extent memory (a pooled block when n fits in one).
func getBlock(n int) []byte {
	if n > MaxPiece {
		return make([]byte, n)
	}
	return (*blocks.Get().(*[]byte))[:n]
}

// putBlock gives b back if it is a pooled block; b must not be used after.
func putBlock(b []byte) {
	if cap(b) == MaxPiece {
		b = b[:MaxPiece]
		blocks.Put(&b)
	}
}

func (f *File) overlapsOther(skip int, off, end int64) bool {
	for j, o := range f.extents {
		if j != skip && o.off < end && o.off+int64(len(o.data)) > off {
			return true
		}
	}
	return false
}

// Dirty returns the bytes waiting to be sent.
func (f *File) Dirty() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dirty
}

// Full returns the bytes waiting in full extents, which a Flush with FullOnly would send.
func (f *File) Full() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for _, e := range f.extents {
		if len(e.data) >= MaxPiece {
			n += int64(len(e.data))
		}
	}
	return n
}

// Truncate drops dirty data at or beyond size (the file was truncated).
func (f *File) Truncate(size int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	keep := f.extents[:0]
	for _, e := range f.extents {
		switch {
		case e.off >= size:
			f.dirty -= int64(len(e.data))
			putBlock(e.data)
		case e.off+int64(len(e.data)) > size:
			cut := e.off + int64(len(e.data)) - size
			f.dirty -= cut
			e.data = e.data[:size-e.off]
			keep = append(keep, e)
		default:
			keep = append(keep, e)
		}
	}
	f.extents = keep
}

// Err returns and clears the error of an earlier background flush.
func (f *File) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.err
	f.err = nil
	return err
}

// SendFunc writes one piece to the owner.
type SendFunc func(ctx context.Context, off int64, data []byte) error

// FlushOptions shape a Flush; the zero value sends all dirty data in pieces of MaxPiece,
// InFlight at once.
type FlushOptions struct {
	Piece    int // bytes per piece, 4 KiB to MaxPiece (0: MaxPiece)
	InFlight int // pieces sent at once (0: InFlight)
	// FullOnly sends only the extents that are full (MaxPiece bytes or more): a flush in the
	// background sends those while a sequential writer keeps filling the last one, so pieces
	// stay whole and aligned.
	FullOnly bool
	// First, if set, sends the first piece (the lowest) alone, before any other: a file
	// that exists only on this side so far is created on the owner with its first data, and
	// the other pieces find it there. Without dirty data it is not called.
	First SendFunc
}

type piece struct {
	off  int64
	data []byte
}

// Flush sends the dirty data in offset order, o.InFlight pieces at once, and waits for all.
// On failure the unsent and failed data stays dirty (so a later flush may retry) and the
// first error is returned; without one, the error an earlier background flush recorded
// (Fail). Flushes of one File are serialised.
func (f *File) Flush(ctx context.Context, o FlushOptions, send SendFunc) error {
	if o.Piece <= 0 {
		o.Piece = MaxPiece
	}
	o.Piece = min(max(o.Piece, 4<<10), MaxPiece)
	if o.InFlight <= 0 {
		o.InFlight = InFlight
	}
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	exts, pending := f.take(o.FullOnly)
	if len(exts) == 0 {
		return pending
	}
	sort.Slice(exts, func(i, j int) bool { return exts[i].off < exts[j].off })
	var pieces []piece
	for _, e := range exts {
		for p := int64(0); p < int64(len(e.data)); p += int64(o.Piece) {
			pieces = append(pieces, piece{e.off + p, e.data[p:min(p+int64(o.Piece), int64(len(e.data)))]})
		}
	}
	failed, err := sendPieces(ctx, pieces, o, send)
	if err != nil {
		f.keep(failed)
	}
	for _, e := range exts {
		putBlock(e.data)
	}
	if err != nil {
		return err
	}
	return pending
}

// take removes the extents a flush sends (all, or the full ones) from the dirty set, and
// returns them with the error of an earlier background flush, which it clears.
func (f *File) take(fullOnly bool) (exts []extent, pending error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fullOnly {
		keep := f.extents[:0:0]
		for _, e := range f.extents {
			if len(e.data) >= MaxPiece {
				exts = append(exts, e)
				f.dirty -= int64(len(e.data))
			} else {
				keep = append(keep, e)
			}
		}
		f.extents = keep
	} else {
		exts = f.extents
		f.extents, f.dirty = nil, 0
	}
	pending, f.err = f.err, nil
	return exts, pending
}

// sendPieces sends pieces (o.First the first, alone), o.InFlight at once, and returns the
// first error with the pieces not sent.
func sendPieces(ctx context.Context, pieces []piece, o FlushOptions, send SendFunc) (failed []piece, firstErr error) {
	if o.First != nil {
		if err := o.First(ctx, pieces[0].off, pieces[0].data); err != nil {
			return pieces, err
		}
		pieces = pieces[1:]
	}
	sem := make(chan struct{}, o.InFlight)
	var wg sync.WaitGroup
	var errMu sync.Mutex
	for _, pc := range pieces {
		sem <- struct{}{}
		// After a failure the rest stays dirty unsent: the owner is gone or refuses, and
		// each further piece would only wait for the same answer.
		errMu.Lock()
		stop := firstErr != nil
		if stop {
			failed = append(failed, pc)
		}
		errMu.Unlock()
		if stop {
			<-sem
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := send(ctx, pc.off, pc.data); err != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				failed = append(failed, pc)
				errMu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed, firstErr
}

// keep makes the pieces a flush failed to send dirty again, under anything written since.
func (f *File) keep(failed []piece) {
	f.mu.Lock()
	newer := f.extents
	f.extents, f.dirty = nil, 0
	f.mu.Unlock()
	for _, pc := range failed {
		f.Write(pc.data, pc.off)
	}
	for _, e := range newer {
		f.Write(e.data, e.off)
		putBlock(e.data)
	}
}

// Fail records an error to report at the next Err or Flush (a background flush failed).
func (f *File) Fail(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}
