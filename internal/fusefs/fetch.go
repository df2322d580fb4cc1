package fusefs

import (
	"context"
	"errors"
	"sync"

	"github.com/peerfs/peerfs/internal/cache"
	"github.com/peerfs/peerfs/internal/wire"
)

// Fetch flow: a read that misses asks for the missing chunk-aligned pieces (at most one wire
// chunk each) plus readahead; each piece is one READ to the owner, many in flight (bounded by
// Options.ReadsInFlight), deduplicated across readers; the reply is written into the cache file and the
// reader waits only for the pieces it needs.

var errShrank = errors.New("file changed on the owner during the read")

// flightKey names a piece of one version of one file, whichever handle or reference asks.
type flightKey struct {
	path string
	ver  cache.Version
	off  int64
}

type flight struct {
	done chan struct{}
	err  error
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

// fetch makes [off, end) of cf present, waiting for it, and starts fetching [end, ahead)
// without waiting.
func (r *Root) fetch(ctx context.Context, p string, cf *cache.File, off, end, ahead int64) error {
	f := r.fetcher()
	var wait []*flight
	for _, pc := range pieces(cf.Missing(off, end-off), int64(r.opts.Piece)) {
		wait = append(wait, r.start(f, p, cf, pc))
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
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// prefetch starts fetching [off, end) of cf in the background.
func (r *Root) prefetch(p string, cf *cache.File, off, end int64) {
	f := r.fetcher()
	for _, pc := range pieces(cf.Missing(off, end-off), int64(r.opts.Piece)) {
		r.start(f, p, cf, pc)
	}
}

// start returns the flight fetching pc, starting it unless one is already under way.
func (r *Root) start(f *fetcher, p string, cf *cache.File, pc cache.Range) *flight {
	k := flightKey{p, cf.Version(), pc.Off}
	f.mu.Lock()
	if fl := f.flights[k]; fl != nil {
		f.mu.Unlock()
		return fl
	}
	fl := &flight{done: make(chan struct{})}
	f.flights[k] = fl
	f.mu.Unlock()
	ref := cf.Retain() // the fetch may outlive the reader's handle
	go func() {
		defer ref.Release()
		fl.err = r.fetchPiece(f, p, ref, pc)
		f.mu.Lock()
		delete(f.flights, k)
		f.mu.Unlock()
		close(fl.done)
	}()
	return fl
}

func (r *Root) fetchPiece(f *fetcher, p string, cf *cache.File, pc cache.Range) error {
	select {
	case f.slots <- struct{}{}:
	case <-f.bg.Done():
		return f.bg.Err()
	}
	defer func() { <-f.slots }()
	bp := f.bufs.Get().(*[]byte)
	defer f.bufs.Put(bp)
	buf := (*bp)[:pc.Len]
	r.stats.roundTrips.Add(1)
	got, err := r.owner.Read(f.bg, p, pc.Off, buf)
	r.stats.fetch.Add(int64(got))
	if err != nil {
		return err
	}
	if int64(got) < pc.Len {
		return errShrank // the owner's file is shorter than the version being cached
	}
	if _, err := cf.WriteAt(buf[:got], pc.Off); err != nil {
		return err
	}
	return nil
}
