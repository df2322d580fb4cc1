// Package fetch brings a remote file's contents into the mount's chunk cache (internal/cache)
// for readers: a random reader's missing pieces as tagged READs, many in flight and shared
// between readers; a sequential reader's as one STREAM per file, which the owner pushes ahead
// of it. Readers copy their bytes out of the replies while the fetch writes them into the
// cache file, so no reply waits for the disk (seed 002). It knows files by share path and
// cached copy only: the FUSE side (internal/fusefs) decides what to fetch, and the Owner
// interface carries the requests. Close cancels everything still running (at unmount).
package fetch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/peerfs/peerfs/internal/cache"
	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/stats"
	"github.com/peerfs/peerfs/internal/wire"
)

// Fetch flow: a read that misses asks for the missing chunk-aligned pieces (at most one wire
// chunk each); each piece is one READ to the owner, many in flight (bounded by
// Options.ReadsInFlight), deduplicated across readers. A reader waits only for the pieces it
// needs and copies its bytes out of their buffers while the fetch writes them into the cache
// file: the reply does not wait for the cache write (seed 002).

// ErrChanged says the owner's file is no longer the version being cached (it is shorter, or
// a change event marked the copy stale): the caller starts over from the file's current
// attributes.
var ErrChanged = errors.New("file changed on the owner during the read")

// Owner is what fetching needs from the peer that owns the share (a *remote.Share does it):
// share-relative paths, and errors carrying the owner's errno (*wire.RemoteError).
type Owner interface {
	// Read reads [off, off+len(dst)) of path into dst, at most wire.MaxChunk bytes; fewer
	// only at the end of the file.
	Read(ctx context.Context, path string, off int64, dst []byte) (int, error)
	// Stream starts pushing [off, off+length) of path, cut at its end (STREAM), and returns
	// the file's attributes as the owner saw them at the start.
	Stream(ctx context.Context, path string, off, length int64) (wire.Entry, remote.ChunkStream, error)
}

// Options configure a Fetcher.
type Options struct {
	Owner Owner
	// ReadsInFlight bounds the READs in flight for random reads (at least 1).
	ReadsInFlight int
	// Piece is the size of one READ; it is rounded up to whole cache chunks, since the cache
	// records only chunks a write covers entirely. At most wire.MaxChunk.
	Piece int
	// Readahead is how far past a sequential reader its stream runs.
	Readahead int64
	// Stats receives the counters round_trips (requests to the owner), streams (STREAMs
	// opened) and the op owner_read (bytes received); nil: counted nowhere.
	Stats *stats.Set
}

// Fetcher fetches for one mount. Safe for concurrent use.
type Fetcher struct {
	owner     Owner
	piece     int64
	readahead int64

	mu      sync.Mutex
	flights map[flightKey]*flight
	streams map[streamKey]*seqStream
	slots   chan struct{}
	bufs    sync.Pool // *[]byte of wire.MaxChunk
	// bg is the context of the work that outlives a reader (READs others joined, streams);
	// Close cancels it.
	bg   context.Context
	stop context.CancelFunc

	roundTrips, streamsOpened *atomic.Int64
	received                  *stats.Op
}

// New returns a Fetcher.
func New(opts Options) *Fetcher {
	if opts.Stats == nil {
		opts.Stats = stats.NewSet()
	}
	piece := int64(opts.Piece)
	if piece <= 0 || piece > wire.MaxChunk {
		piece = wire.MaxChunk
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fetcher{
		owner:         opts.Owner,
		piece:         (piece + cache.ChunkSize - 1) &^ (cache.ChunkSize - 1),
		readahead:     opts.Readahead,
		flights:       map[flightKey]*flight{},
		streams:       map[streamKey]*seqStream{},
		slots:         make(chan struct{}, max(opts.ReadsInFlight, 1)),
		bg:            ctx,
		stop:          cancel,
		roundTrips:    opts.Stats.Counter("round_trips"),
		streamsOpened: opts.Stats.Counter("streams"),
		received:      opts.Stats.Op("owner_read"),
	}
	f.bufs.New = func() any { b := make([]byte, wire.MaxChunk); return &b }
	return f
}

// Close cancels the fetches and streams under way; their readers get an error. Later calls
// fail at once.
func (f *Fetcher) Close() { f.stop() }

// VersionOf is the cache version of a file with attributes e.
func VersionOf(e *wire.Entry) cache.Version {
	return cache.Version{Size: int64(e.Size), MtimeNs: e.MtimeNs, Ino: e.Ino}
}

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
	// pool once they are done. Added to only under Fetcher.mu while the flight is listed.
	copying sync.WaitGroup
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

// ReadInto fills dst with [off, off+len(dst)) of cf, the cached copy of path: the missing
// pieces copied from their READ replies, the rest from the cache file. The pieces are
// written into the cache file too, after.
func (f *Fetcher) ReadInto(ctx context.Context, p string, cf *cache.File, off int64, dst []byte) error {
	end := off + int64(len(dst))
	missing := pieces(cf.Missing(off, end-off), f.piece)
	held := make([]*flight, len(missing))
	for i, pc := range missing {
		held[i] = f.start(p, cf, pc, true)
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

// Fetch makes [off, end) of cf, the cached copy of path, present, waiting for it, and
// starts fetching [end, ahead) without waiting.
func (f *Fetcher) Fetch(ctx context.Context, p string, cf *cache.File, off, end, ahead int64) error {
	var wait []*flight
	for _, pc := range pieces(cf.Missing(off, end-off), f.piece) {
		wait = append(wait, f.start(p, cf, pc, false))
	}
	if ahead > end {
		f.Prefetch(p, cf, end, ahead)
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

// Prefetch starts fetching [off, end) of cf in the background.
func (f *Fetcher) Prefetch(p string, cf *cache.File, off, end int64) {
	for _, pc := range pieces(cf.Missing(off, end-off), f.piece) {
		f.start(p, cf, pc, false)
	}
}

// start returns the flight fetching pc, starting it unless one is already under way. A
// reader that will copy from the flight's buffer says so (willCopy) and calls copying.Done
// after.
func (f *Fetcher) start(p string, cf *cache.File, pc cache.Range, willCopy bool) *flight {
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
		f.fetchPiece(k, ref, pc, fl)
	}()
	return fl
}

// fetchPiece READs pc, hands the bytes to the waiting readers, then writes them into the
// cache file and, once the readers copied them, gives the buffer back. A failed cache write
// costs only a later fetch: the readers already have their bytes.
func (f *Fetcher) fetchPiece(k flightKey, cf *cache.File, pc cache.Range, fl *flight) {
	defer close(fl.done)
	if f.bg.Err() != nil { // closed: slots may have room, but nothing more is asked
		fl.err = f.bg.Err()
		close(fl.ready)
		f.unlist(k, fl)
		return
	}
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
	f.roundTrips.Add(1)
	got, err := f.owner.Read(f.bg, k.path, pc.Off, buf)
	f.received.Add(int64(got))
	if err == nil && int64(got) < pc.Len {
		err = ErrChanged // the owner's file is shorter than the version being cached
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
func (f *Fetcher) unlist(k flightKey, fl *flight) {
	f.mu.Lock()
	delete(f.flights, k)
	f.mu.Unlock()
	fl.copying.Wait()
}
