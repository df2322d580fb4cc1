package fusefs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/peerfs/peerfs/internal/cache"
)

// Sequential reads (seed 002): when a reader's reads follow one another, the mount opens one
// STREAM from the reader's position and the owner pushes chunks without a request each. The
// stream's goroutine writes them into the cache file ahead of the reader, so in steady state a
// read finds its bytes cached and the cache write is not on its reply path. The stream keeps
// at most Options.Readahead bytes ahead of the furthest reader (then it stops consuming, and the
// owner runs out of credit), and ends at the end of the file, after streamIdle without a
// reader advancing, when a newer stream of the file replaces it, or when the version changes.
// Random reads keep using tagged READs (fetch.go).

const (
	// StreamWindow is the credit an Owner grants a STREAM: what the owner may push beyond
	// what the mount consumed; enough to keep a loopback or LAN link busy while the mount
	// writes earlier chunks into its cache.
	StreamWindow = 8 << 20
	// streamReserve is how much of the cache file a stream reserves at a time.
	streamReserve = 16 << 20
	// streamIdle ends a stream whose readers stopped.
	streamIdle = 2 * time.Second
)

// ChunkStream delivers a STREAM's chunks in order; one goroutine uses it.
type ChunkStream interface {
	// Next returns the next chunk's offset and bytes, valid until the next call of Next or
	// Close. At the end of the stream it returns io.EOF.
	Next(ctx context.Context) (off int64, data []byte, err error)
	// Close ends the stream, cancelling it on the owner if it has not ended.
	Close()
}

var (
	errStreamStopped = errors.New("sequential stream stopped")
	errStreamOrder   = errors.New("STREAM data out of order")
)

type streamKey struct {
	path string
	ver  cache.Version
}

// seqStream is one STREAM feeding one cache file.
type seqStream struct {
	key   streamKey
	cf    *cache.File // a reference of the stream's own
	start int64
	end   int64 // the file's size: the stream ends there
	wake  chan struct{}
	ahead int64 // the mount's readahead

	mu   sync.Mutex
	next int64 // [start, next) is in the cache
	want int64 // the goroutine consumes while next < want
	done bool
	err  error         // why the stream ended (nil at end of file)
	prog chan struct{} // closed at the next progress, when a reader waits
}

// covers reports whether the stream will bring off soon: it started at or before off and
// off is within the reach of its current position.
func (s *seqStream) covers(off int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.done && s.start <= off && off <= s.next+StreamWindow+s.ahead
}

// demand raises how far the stream reads ahead.
func (s *seqStream) demand(to int64) {
	s.mu.Lock()
	raised := to > s.want
	if raised {
		s.want = to
	}
	s.mu.Unlock()
	if raised {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// wait blocks until [.., to) is in the cache or the stream ended; it returns the stream's
// error in the second case (errStreamStopped when it merely stopped).
func (s *seqStream) wait(ctx context.Context, to int64) error {
	for {
		s.mu.Lock()
		if s.next >= to {
			s.mu.Unlock()
			return nil
		}
		if s.done {
			err := s.err
			s.mu.Unlock()
			if err == nil {
				err = errStreamStopped
			}
			return err
		}
		if s.prog == nil {
			s.prog = make(chan struct{})
		}
		prog := s.prog
		s.mu.Unlock()
		select {
		case <-prog:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// progress records that [start, next) is cached, or that the stream ended with err.
func (s *seqStream) progress(next int64, done bool, err error) {
	s.mu.Lock()
	s.next = next
	if done && !s.done {
		s.done, s.err = true, err
	}
	prog := s.prog
	s.prog = nil
	s.mu.Unlock()
	if prog != nil {
		close(prog)
	}
}

// stop ends the stream from outside (a newer stream of the file replaced it).
func (s *seqStream) stop() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *seqStream) stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// readSequential makes [off, end) of cf present for a sequential reader, through the file's
// stream (started here if none covers off), and asks the stream to run ahead to ahead. A
// stream that stops before reaching end leaves the rest to tagged READs.
func (r *Root) readSequential(ctx context.Context, p string, cf *cache.File, off, end, ahead int64) error {
	s := r.streamFor(p, cf, off)
	s.demand(max(ahead, end))
	err := s.wait(ctx, end)
	if err == nil || errors.Is(err, errStreamStopped) {
		if cf.Present(off, end-off) {
			return nil
		}
		return r.fetch(ctx, p, cf, off, end, end)
	}
	return err
}

// readAheadSequential keeps a sequential reader's stream ahead of it after a cache hit at end.
func (r *Root) readAheadSequential(p string, cf *cache.File, end, ahead int64) {
	f := r.fetcher()
	k := streamKey{p, cf.Version()}
	f.mu.Lock()
	s := f.streams[k]
	f.mu.Unlock()
	if s != nil && s.covers(end) {
		s.demand(ahead)
		return
	}
	if missing := cf.Missing(end, ahead-end); len(missing) > 0 {
		s := r.streamFor(p, cf, missing[0].Off)
		s.demand(ahead)
	}
}

// streamFor returns the stream of cf that will bring off, starting one at off (aligned down
// to a cache chunk) when none does.
func (r *Root) streamFor(p string, cf *cache.File, off int64) *seqStream {
	f := r.fetcher()
	k := streamKey{p, cf.Version()}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.streams[k]; s != nil {
		if s.covers(off) {
			return s
		}
		s.stop()
	}
	start := off &^ (cache.ChunkSize - 1)
	s := &seqStream{key: k, cf: cf.Retain(), start: start, end: cf.Version().Size, wake: make(chan struct{}, 1),
		ahead: r.opts.Readahead, next: start, want: start}
	f.streams[k] = s
	r.stats.streams.Add(1)
	go r.runStream(f, s)
	return s
}

// runStream consumes one STREAM into the cache file while readers want more.
func (r *Root) runStream(f *fetcher, s *seqStream) {
	var err error
	next := s.start
	defer func() {
		s.progress(next, true, err)
		f.mu.Lock()
		if f.streams[s.key] == s {
			delete(f.streams, s.key)
		}
		f.mu.Unlock()
		s.cf.Release()
	}()
	r.stats.roundTrips.Add(1)
	e, cs, err := r.owner.Stream(f.bg, s.key.path, s.start, s.end-s.start)
	if err != nil {
		return
	}
	defer cs.Close()
	if version(&e) != s.key.ver {
		err = errShrank // the file changed since this version was cached: readers start over
		return
	}
	idle := time.NewTimer(streamIdle)
	defer idle.Stop()
	reserved := s.start
	for next < s.end {
		// Consume only while a reader wants more: the owner then runs out of credit.
		for {
			s.mu.Lock()
			wanted, stopped := next < s.want, s.done
			s.mu.Unlock()
			if stopped {
				return
			}
			if wanted {
				break
			}
			idle.Reset(streamIdle)
			select {
			case <-s.wake:
			case <-idle.C:
				return // readers went away; a later read starts a new stream
			case <-f.bg.Done():
				err = f.bg.Err()
				return
			}
		}
		var off int64
		var data []byte
		off, data, err = cs.Next(f.bg)
		if errors.Is(err, io.EOF) {
			// The owner's file ended before the version's size: it changed.
			err = errShrank
			return
		}
		if err != nil {
			return
		}
		if off != next {
			err = fmt.Errorf("%w: got offset %d, want %d", errStreamOrder, off, next)
			return
		}
		if end := off + int64(len(data)); end > reserved {
			// Only a speed-up: on a full disk the write below reports the error.
			n := max(streamReserve, end-reserved)
			_ = s.cf.Reserve(reserved, n)
			reserved += n
		}
		if _, err = s.cf.WriteAt(data, off); err != nil {
			return
		}
		r.stats.fetch.Add(int64(len(data)))
		next += int64(len(data))
		if s.cf.Stale() {
			return // a change event: the cache file is no longer served
		}
		s.progress(next, false, nil)
	}
	// Take the END, so the exchange closes without a CANCEL.
	if _, _, eerr := cs.Next(f.bg); !errors.Is(eerr, io.EOF) && eerr != nil {
		err = eerr
	}
}
