package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/peerfs/peerfs/internal/cache"
	"github.com/peerfs/peerfs/internal/remote"
)

// Sequential reads (seed 002): when a reader's reads follow one another, the mount opens one
// STREAM from the reader's position and the owner pushes chunks without a request each. Two
// goroutines run a stream: the receiver takes each chunk off the link and publishes it to the
// readers, who copy what they need straight from it; the writer stores it in the cache file
// and then gives its buffer and credit back. So a reply never waits for the cache write, and
// receiving overlaps writing. The stream consumes at most Options.Readahead bytes ahead of the
// furthest reader (then the owner runs out of credit), and ends at the end of the file, after
// streamIdle without a reader advancing, when a newer stream of the file replaces it, or when
// the version changes, or the Fetcher closes. Random reads keep using tagged READs (fetch.go).

const (
	// streamReserve is how much of the cache file a stream reserves at a time.
	streamReserve = 16 << 20
	// streamIdle ends a stream whose readers stopped.
	streamIdle = 2 * time.Second
	// streamQueue bounds the chunks received but not yet written to the cache.
	streamQueue = 8
)

var errStreamOrder = errors.New("STREAM data out of order")

type streamKey struct {
	path string
	ver  cache.Version
	copy uint64 // cache.File.Copy: a stream fills one cached copy (flightKey)
}

// received is a chunk published to readers and not yet given back.
type received struct {
	remote.Chunk
	copying sync.WaitGroup // readers copying out of it
}

var receivedPool = sync.Pool{New: func() any { return new(received) }}

// seqStream is one STREAM feeding one cache file.
type seqStream struct {
	key   streamKey
	cf    *cache.File // a reference of the stream's own
	start int64
	end   int64 // the file's size: the stream ends there
	wake  chan struct{}
	ahead int64 // the mount's readahead

	mu      sync.Mutex
	next    int64       // [start, next) was received
	written int64       // [start, written) is in the cache file
	pending []*received // received, not yet written or not yet given back, in order
	want    int64       // the receiver consumes while next < want
	done    bool
	err     error         // why the stream ended (nil at end of file)
	prog    chan struct{} // closed at the next progress, when a reader waits
}

// covers reports whether the stream will bring off soon: it started at or before off and
// off is within the reach of its current position.
func (s *seqStream) covers(off int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.done && s.start <= off && off <= s.next+remote.StreamWindow+s.ahead
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
		kick(s.wake)
	}
}

// read fills dst with [off, off+len(dst)) once the stream has received it: the part already
// written from the cache file, the rest copied from the received chunks. filled is false when
// the stream ended first (err says why, nil when it merely stopped).
func (s *seqStream) read(ctx context.Context, dst []byte, off int64) (filled bool, err error) {
	end := off + int64(len(dst))
	var using [4]*received // a read of at most 1 MiB spans at most two 1 MiB chunks
	for {
		s.mu.Lock()
		if s.next >= end && off >= s.start {
			written := s.written
			n := 0
			if written < end {
				// Take the chunks that hold [max(off, written), end): the writer gives
				// none back while we copy.
				for _, rc := range s.pending {
					if rc.Off+int64(len(rc.Data)) > max(off, written) && rc.Off < end && n < len(using) {
						rc.copying.Add(1)
						using[n] = rc
						n++
					}
				}
			}
			s.mu.Unlock()
			// The chunks must cover what the cache does not: a writer that failed gives
			// its chunks back without advancing written.
			covered := max(off, written)
			for _, rc := range using[:n] {
				if rc.Off <= covered {
					covered = max(covered, rc.Off+int64(len(rc.Data)))
				}
			}
			if covered < end {
				for _, rc := range using[:n] {
					rc.copying.Done()
				}
				s.mu.Lock()
				err := s.err
				s.mu.Unlock()
				if err == nil {
					err = ErrChanged // the stream's version is gone: read it again
				}
				return false, err
			}
			if head := min(written, end) - off; head > 0 {
				if _, err := s.cf.ReadAt(dst[:head], off); err != nil {
					for _, rc := range using[:n] {
						rc.copying.Done()
					}
					return false, err
				}
			}
			for _, rc := range using[:n] {
				a, b := max(off, rc.Off), min(end, rc.Off+int64(len(rc.Data)))
				copy(dst[a-off:b-off], rc.Data[a-rc.Off:b-rc.Off])
				rc.copying.Done()
			}
			return true, nil
		}
		if s.done {
			err := s.err
			s.mu.Unlock()
			return false, err
		}
		if err := s.waitProgress(ctx); err != nil {
			return false, err
		}
	}
}

// waitProgress unlocks s.mu, which the caller holds, and waits for the stream's next
// progress (update) or the end of ctx.
func (s *seqStream) waitProgress(ctx context.Context) error {
	if s.prog == nil {
		s.prog = make(chan struct{})
	}
	prog := s.prog
	s.mu.Unlock()
	select {
	case <-prog:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// update changes the stream's state under its lock and wakes the waiting readers.
func (s *seqStream) update(f func()) {
	s.mu.Lock()
	f()
	prog := s.prog
	s.prog = nil
	s.mu.Unlock()
	if prog != nil {
		close(prog)
	}
}

// finish records that the stream ended, with err (nil: end of file or stopped).
func (s *seqStream) finish(err error) {
	s.update(func() {
		if !s.done {
			s.done, s.err = true, err
		} else if s.err == nil {
			s.err = err
		}
	})
}

// stop ends the stream from outside (a newer stream of the file replaced it).
func (s *seqStream) stop() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	kick(s.wake)
}

func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// ReadSequential serves [off, off+len(dst)) of cf, the cached copy of path, to a sequential
// reader through the file's stream (started here if none covers off), and asks the stream to
// run ahead to ahead. filled is false, with a nil error, when the stream stopped first:
// tagged READs take over (Fetch).
func (f *Fetcher) ReadSequential(ctx context.Context, p string, cf *cache.File, off, ahead int64, dst []byte) (filled bool, err error) {
	s := f.streamFor(p, cf, off)
	s.demand(max(ahead, off+int64(len(dst))))
	filled, err = s.read(ctx, dst, off)
	return filled, err
}

// StreamCovers reports whether a stream of cf runs and will bring off soon: a read there is
// sequential too, whatever order the kernel's readahead sent it in.
func (f *Fetcher) StreamCovers(p string, cf *cache.File, off int64) bool {
	f.mu.Lock()
	s := f.streams[streamKey{p, cf.Version(), cf.Copy()}]
	f.mu.Unlock()
	return s != nil && s.covers(off)
}

// ReadAhead keeps a sequential reader's stream ahead of it, up to ahead, after a cache hit
// that ended at end.
func (f *Fetcher) ReadAhead(p string, cf *cache.File, end, ahead int64) {
	k := streamKey{p, cf.Version(), cf.Copy()}
	f.mu.Lock()
	s := f.streams[k]
	f.mu.Unlock()
	if s != nil && s.covers(end) {
		s.demand(ahead)
		return
	}
	if missing := cf.Missing(end, ahead-end); len(missing) > 0 {
		s := f.streamFor(p, cf, missing[0].Off)
		s.demand(ahead)
	}
}

// streamFor returns the stream of cf that will bring off, starting one at off (aligned down
// to a cache chunk) when none does.
func (f *Fetcher) streamFor(p string, cf *cache.File, off int64) *seqStream {
	k := streamKey{p, cf.Version(), cf.Copy()}
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
		ahead: f.readahead, next: start, written: start, want: start}
	f.streams[k] = s
	f.streamsOpened.Add(1)
	go f.runStream(s)
	return s
}

// runStream is a stream's receiver: it takes chunks off the link while readers want more,
// publishes them and queues them for the writer.
func (f *Fetcher) runStream(s *seqStream) {
	var err error
	defer func() {
		s.finish(err)
		f.mu.Lock()
		if f.streams[s.key] == s {
			delete(f.streams, s.key)
		}
		f.mu.Unlock()
		s.cf.Release()
	}()
	f.roundTrips.Add(1)
	e, cs, err := f.owner.Stream(f.bg, s.key.path, s.start, s.end-s.start)
	if err != nil {
		return
	}
	defer cs.Close()
	if VersionOf(&e) != s.key.ver {
		err = ErrChanged // the file changed since this version was cached: readers start over
		return
	}
	queue := make(chan *received, streamQueue)
	wrote := make(chan error, 1)
	go func() { wrote <- f.writeStream(s, cs, queue) }()
	defer func() {
		close(queue)
		if werr := <-wrote; err == nil {
			err = werr
		}
	}()

	idle := time.NewTimer(streamIdle)
	defer idle.Stop()
	for next := s.start; next < s.end; {
		// Consume only while a reader wants more: the owner then runs out of credit.
		var wanted bool
		if wanted, err = f.waitWanted(s, next, idle); !wanted {
			return
		}
		var c remote.Chunk
		c, err = cs.Next(f.bg)
		if errors.Is(err, io.EOF) {
			err = ErrChanged // the owner's file ended before the version's size: it changed
			return
		}
		if err != nil {
			return
		}
		if c.Off != next {
			cs.Release(c)
			err = fmt.Errorf("%w: got offset %d, want %d", errStreamOrder, c.Off, next)
			return
		}
		f.received.Add(int64(len(c.Data)))
		rc := receivedPool.Get().(*received)
		rc.Chunk = c
		next += int64(len(c.Data))
		s.update(func() {
			s.pending = append(s.pending, rc)
			s.next = next
		})
		queue <- rc
	}
	// Take the END, so the exchange closes without a CANCEL.
	if _, eerr := cs.Next(f.bg); eerr != nil && !errors.Is(eerr, io.EOF) {
		err = eerr
	}
}

// waitWanted waits until a reader wants more than [start, next) of s. It reports false when
// the stream should end instead: stopped, idle for streamIdle (readers went away; a later read
// starts a new stream), or the Fetcher closed (err).
func (f *Fetcher) waitWanted(s *seqStream, next int64, idle *time.Timer) (bool, error) {
	for {
		s.mu.Lock()
		wanted, stopped := next < s.want, s.done
		s.mu.Unlock()
		if stopped || wanted {
			return wanted && !stopped, nil
		}
		idle.Reset(streamIdle)
		select {
		case <-s.wake:
		case <-idle.C:
			return false, nil
		case <-f.bg.Done():
			return false, f.bg.Err()
		}
	}
}

// writeStream is a stream's writer: it stores each received chunk in the cache file, then,
// once no reader copies from it any more, gives it back. It keeps going after an error only
// to give the chunks back.
func (f *Fetcher) writeStream(s *seqStream, cs remote.ChunkStream, queue <-chan *received) error {
	var err error
	reserved := s.start
	for rc := range queue {
		if err == nil && s.cf.Stale() {
			err = ErrChanged // a change event: readers start over from the new version
		}
		if err == nil {
			if end := rc.Off + int64(len(rc.Data)); end > reserved {
				// Only a speed-up: on a full disk the write below reports the error.
				n := max(streamReserve, end-reserved)
				_ = s.cf.Reserve(reserved, n)
				reserved += n
			}
			_, err = s.cf.WriteAt(rc.Data, rc.Off)
		}
		s.update(func() {
			if err == nil {
				s.written = rc.Off + int64(len(rc.Data))
			}
			s.pending = s.pending[1:]
		})
		rc.copying.Wait()
		cs.Release(rc.Chunk)
		rc.Chunk = remote.Chunk{}
		receivedPool.Put(rc)
		if err != nil {
			s.finish(err)
		}
	}
	return err
}

// Settle waits, at most a second, for a stream that has received the whole of cf to finish
// writing it into the cache: a file opened again right after a sequential read then finds
// its cache complete and is served by passthrough.
func (f *Fetcher) Settle(ctx context.Context, p string, cf *cache.File) {
	f.mu.Lock()
	s := f.streams[streamKey{p, cf.Version(), cf.Copy()}]
	f.mu.Unlock()
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for {
		s.mu.Lock()
		if s.next < s.end || s.written >= s.end || s.done {
			s.mu.Unlock()
			return
		}
		if s.waitProgress(ctx) != nil {
			return
		}
	}
}
