package fusefs

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/peerfs/peerfs/internal/cache"
	"github.com/peerfs/peerfs/internal/wire"
)

// Fetch flow: a read that misses asks for the missing chunk-aligned pieces (at most one wire
// chunk each); each piece is one READ to the owner, many in flight (bounded by
// Options.ReadsInFlight), deduplicated across readers. A reader waits only for the pieces it
// needs and copies its bytes out of their buffers while the fetch writes them into the cache
// file: the reply does not wait for the cache write (seed 002).

var errShrank = errors.New("file changed on the owner during the read")

// flightKey names a piece of one cached copy of one file, whichever handle or reference asks.
// The copy, not only the version: a version dropped and cached again (the mount's own write
// can leave size and mtime as they were, within the owner's timestamp granularity) is filled
// anew, and a READ writing into the dropped copy would leave the new one without the range.
// Pieces start on multiples of the piece size but end where the missing range ended when
// they were cut, so two pieces at one offset may differ in length: the length is part of
// the key, and a reader copies only from a flight that holds all it needs.
type flightKey struct {
	path string
	ver  cache.Version
	copy uint64 // cache.File.Copy
	off  int64
	len  int64
}

type flight struct {
	ready chan struct{} // closed once data or err is set
	data  []byte        // the piece's bytes, valid while the reader holds copying
	err   error
	// done is closed once the bytes are in the cache file, or the fetch failed (then err,
	// or cacheErr for the cache write, says why).
	done     chan struct{}
	cacheErr error
	// copying counts the readers that will copy out of data; the buffer goes back to the
	// pool once they are done. Added to only under fetcher.mu while the flight is listed.
	copying sync.WaitGroup
}

type fetcher struct {
	mu      sync.Mutex
	flights map[flightKey]*flight
	streams map[streamKey]*seqStream
	slots   chan struct{}
	bufs    sync.Pool // *[]byte of wire.MaxChunk
	bg      context.Context
	stop    context.CancelFunc
}

func (r *Root) fetcher() *fetcher {
	r.fetchOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		r.fetch_ = &fetcher{flights: map[flightKey]*flight{}, streams: map[streamKey]*seqStream{}, slots: make(chan struct{}, r.opts.ReadsInFlight), bg: ctx, stop: cancel}
		r.fetch_.bufs.New = func() any { b := make([]byte, wire.MaxChunk); return &b }
	})
	return r.fetch_
}

func (r *Root) key(p string) cache.Key {
	return cache.Key{Peer: r.opts.Peer, Share: r.opts.Share, Path: p}
}

// readPiece is the size of one READ: Options.Piece rounded up to whole cache chunks, since
// the cache records only chunks a write covers entirely.
func (r *Root) readPiece() int64 {
	return (int64(r.opts.Piece) + cache.ChunkSize - 1) &^ (cache.ChunkSize - 1)
}

// pieces cuts ranges into fetch pieces of at most size bytes, aligned to multiples of size.
func pieces(ranges []cache.Range, size int64) []cache.Range {
	var out []cache.Range
	for _, rg := range ranges {
		for off := rg.Off; off < rg.Off+rg.Len; {
			n := min(size-(off%size), rg.Off+rg.Len-off)
			out = append(out, cache.Range{Off: off, Len: n})
			off += n
		}
	}
	return out
}

// fetchInto fills dst with [off, off+len(dst)) of cf: the missing pieces copied from their
// READ replies, the rest from the cache file.
func (r *Root) fetchInto(ctx context.Context, p string, cf *cache.File, off int64, dst []byte) error {
	f := r.fetcher()
	end := off + int64(len(dst))
	missing := pieces(cf.Missing(off, end-off), r.readPiece())
	held := make([]*flight, len(missing))
	for i, pc := range missing {
		held[i] = r.start(f, p, cf, pc, true)
	}
	defer func() {
		for _, fl := range held {
			fl.copying.Done()
		}
	}()
	for _, fl := range held {
		select {
		case <-fl.ready:
			if fl.err != nil {
				return fl.err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// Walk [off, end): the pieces from their buffers, the gaps between them (present when
	// Missing was asked) from the cache.
	pos := off
	for i, pc := range missing {
		if pc.Off > pos {
			if _, err := cf.ReadAt(dst[pos-off:pc.Off-off], pos); err != nil {
				return err
			}
		}
		a, b := max(off, pc.Off), min(end, pc.Off+pc.Len)
		data := held[i].data
		if int64(len(data)) < b-pc.Off {
			return fmt.Errorf("internal error: a READ of %d bytes at %d holds only %d", pc.Len, pc.Off, len(data))
		}
		copy(dst[a-off:b-off], data[a-pc.Off:b-pc.Off])
		pos = b
	}
	if pos < end {
		if _, err := cf.ReadAt(dst[pos-off:], pos); err != nil {
			return err
		}
	}
	return nil
}

// fetch makes [off, end) of cf present, waiting for it, and starts fetching [end, ahead)
// without waiting.
func (r *Root) fetch(ctx context.Context, p string, cf *cache.File, off, end, ahead int64) error {
	f := r.fetcher()
	var wait []*flight
	for _, pc := range pieces(cf.Missing(off, end-off), r.readPiece()) {
		wait = append(wait, r.start(f, p, cf, pc, false))
	}
	if ahead > end {
		r.prefetch(p, cf, end, ahead)
	}
	for _, fl := range wait {
		select {
		case <-fl.done:
			if fl.err != nil {
				return fl.err
			}
			if fl.cacheErr != nil {
				return fl.cacheErr
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// prefetch starts fetching [off, end) of cf in the background.
func (r *Root) prefetch(p string, cf *cache.File, off, end int64) {
	f := r.fetcher()
	for _, pc := range pieces(cf.Missing(off, end-off), r.readPiece()) {
		r.start(f, p, cf, pc, false)
	}
}

// start returns the flight fetching pc, starting it unless one is already under way. A
// reader that will copy from the flight's buffer says so (willCopy) and calls copying.Done
// after.
func (r *Root) start(f *fetcher, p string, cf *cache.File, pc cache.Range, willCopy bool) *flight {
	k := flightKey{p, cf.Version(), cf.Copy(), pc.Off, pc.Len}
	f.mu.Lock()
	if fl := f.flights[k]; fl != nil {
		if willCopy {
			fl.copying.Add(1)
		}
		f.mu.Unlock()
		return fl
	}
	fl := &flight{ready: make(chan struct{}), done: make(chan struct{})}
	if willCopy {
		fl.copying.Add(1)
	}
	f.flights[k] = fl
	f.mu.Unlock()
	ref := cf.Retain() // the fetch may outlive the reader's handle
	go func() {
		defer ref.Release()
		r.fetchPiece(f, k, ref, pc, fl)
	}()
	return fl
}

// fetchPiece READs pc, hands the bytes to the waiting readers, then writes them into the
// cache file and, once the readers copied them, gives the buffer back. A failed cache write
// costs only a later fetch: the readers already have their bytes.
func (r *Root) fetchPiece(f *fetcher, k flightKey, cf *cache.File, pc cache.Range, fl *flight) {
	defer close(fl.done)
	select {
	case f.slots <- struct{}{}:
	case <-f.bg.Done():
		fl.err = f.bg.Err()
		close(fl.ready)
		f.unlist(k, fl)
		return
	}
	bp := f.bufs.Get().(*[]byte)
	buf := (*bp)[:pc.Len]
	r.stats.roundTrips.Add(1)
	got, err := r.owner.Read(f.bg, k.path, pc.Off, buf)
	r.stats.fetch.Add(int64(got))
	if err == nil && int64(got) < pc.Len {
		err = errShrank // the owner's file is shorter than the version being cached
	}
	fl.data, fl.err = buf[:got], err
	close(fl.ready)
	if err == nil {
		_, fl.cacheErr = cf.WriteAt(buf[:got], pc.Off)
	}
	<-f.slots
	f.unlist(k, fl)
	fl.data = nil
	f.bufs.Put(bp)
}

// unlist removes a finished flight, so no reader joins it any more, and waits for the
// readers still copying out of its buffer.
func (f *fetcher) unlist(k flightKey, fl *flight) {
	f.mu.Lock()
	delete(f.flights, k)
	f.mu.Unlock()
	fl.copying.Wait()
}
