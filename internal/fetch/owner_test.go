package fetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/cache"
	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/stats"
	"github.com/peerfs/peerfs/internal/wire"
)

// fakeOwner is an owner of one file, "f", held in memory: Read answers from it, Stream
// pushes it in chunks of chunk bytes. With block set, both wait for their context instead.
type fakeOwner struct {
	data    []byte
	entry   wire.Entry // what Stream reports of the file
	chunk   int
	block   bool
	reads   atomic.Int32
	streams atomic.Int32
	closed  atomic.Int32 // streams closed
}

func newFakeOwner(size int) *fakeOwner {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i/4096)
	}
	return &fakeOwner{data: data, chunk: wire.MaxChunk, // as an owner's STREAM sends them
		entry: wire.Entry{Name: "f", Mode: wire.ModeRegular | 0o644, Size: uint64(size), MtimeNs: 1, Ino: 1}}
}

func (o *fakeOwner) version() cache.Version { return VersionOf(&o.entry) }

func (o *fakeOwner) Read(ctx context.Context, path string, off int64, dst []byte) (int, error) {
	o.reads.Add(1)
	if o.block {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	if off >= int64(len(o.data)) {
		return 0, nil
	}
	return copy(dst, o.data[off:]), nil
}

func (o *fakeOwner) Stream(ctx context.Context, path string, off, length int64) (wire.Entry, remote.ChunkStream, error) {
	o.streams.Add(1)
	end := min(off+length, int64(len(o.data)))
	return o.entry, &fakeStream{o: o, next: off, end: end}, nil
}

type fakeStream struct {
	o         *fakeOwner
	next, end int64
}

func (s *fakeStream) Next(ctx context.Context) (remote.Chunk, error) {
	if s.o.block {
		<-ctx.Done()
		return remote.Chunk{}, ctx.Err()
	}
	if s.next >= s.end {
		return remote.Chunk{}, io.EOF
	}
	n := min(int64(s.o.chunk), s.end-s.next)
	c := remote.Chunk{Off: s.next, Data: bytes.Clone(s.o.data[s.next : s.next+n])}
	s.next += n
	return c, nil
}

func (s *fakeStream) Release(remote.Chunk) {}
func (s *fakeStream) Close()               { s.o.closed.Add(1) }

func key(p string) cache.Key { return cache.Key{Peer: "p", Share: "s", Path: p} }

// newStore opens a chunk cache that the test's end closes.
func newStore(t *testing.T) *cache.Store {
	t.Helper()
	store, err := cache.Open(cache.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// cached returns the cache copy of "f" at version v, and closes the store at the test's end.
func cached(t *testing.T, v cache.Version) *cache.File {
	t.Helper()
	cf, err := newStore(t).Get(key("f"), v)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cf.Release)
	return cf
}

// A random read gets the owner's bytes, leaves them in the cache, and counts what it asked.
func TestReadIntoFillsTheCache(t *testing.T) {
	o := newFakeOwner(3<<20 + 100)
	cf := cached(t, o.version())
	set := stats.NewSet()
	f := New(Options{Owner: o, ReadsInFlight: 4, Stats: set})
	defer f.Close()
	off, n := int64(1<<20+5), 2<<20
	dst := make([]byte, n)
	if err := f.ReadInto(context.Background(), "f", cf, off, dst); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, o.data[off:off+int64(n)]) {
		t.Fatal("ReadInto returned other bytes than the owner's")
	}
	// The cache write follows the reply: Fetch of the same range waits for it.
	if err := f.Fetch(context.Background(), "f", cf, off, off+int64(n), 0); err != nil {
		t.Fatal(err)
	}
	if !cf.Present(off, int64(n)) {
		t.Fatal("the fetched range is not in the cache")
	}
	reads := o.reads.Load()
	if reads == 0 || set.Report().Counters["round_trips"] != int64(reads) {
		t.Errorf("%d READs, round_trips %d", reads, set.Report().Counters["round_trips"])
	}
	if err := f.ReadInto(context.Background(), "f", cf, off, dst); err != nil || o.reads.Load() != reads {
		t.Errorf("a cached range was asked for again (%d READs, was %d): %v", o.reads.Load(), reads, err)
	}
}

// A sequential reader is served by one STREAM, which fills the cache as it goes.
func TestReadSequentialStreamsTheFile(t *testing.T) {
	o := newFakeOwner(5<<20 + 3)
	cf := cached(t, o.version())
	f := New(Options{Owner: o, ReadsInFlight: 4, Readahead: 2 << 20})
	defer f.Close()
	size := int64(len(o.data))
	got := make([]byte, 0, size)
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; {
		// As fusefs reads: from the cache what the stream wrote there already.
		end := min(off+int64(len(buf)), size)
		if cf.Present(off, end-off) {
			if _, err := cf.ReadAt(buf[:end-off], off); err != nil {
				t.Fatal(err)
			}
		} else if filled, err := f.ReadSequential(context.Background(), "f", cf, off, min(end+f.readahead, size), buf[:end-off]); err != nil || !filled {
			t.Fatalf("read at %d: filled %v, %v", off, filled, err)
		}
		got = append(got, buf[:end-off]...)
		off = end
	}
	if !bytes.Equal(got, o.data) {
		t.Fatal("the stream gave other bytes than the owner's")
	}
	if o.streams.Load() != 1 || o.reads.Load() != 0 {
		t.Errorf("%d STREAMs and %d READs, want one STREAM and no READ", o.streams.Load(), o.reads.Load())
	}
	f.Settle(context.Background(), "f", cf)
	if !cf.Complete() {
		t.Error("the streamed file is not complete in the cache")
	}
}

// A STREAM that finds another version of the file than the one cached ends with ErrChanged.
func TestStreamOfAChangedFile(t *testing.T) {
	o := newFakeOwner(2 << 20)
	cf := cached(t, o.version())
	o.entry.MtimeNs = 2 // changed on the owner since
	f := New(Options{Owner: o})
	defer f.Close()
	_, err := f.ReadSequential(context.Background(), "f", cf, 0, 2<<20, make([]byte, 1<<20))
	if !errors.Is(err, ErrChanged) {
		t.Fatalf("read of a changed file: %v, want ErrChanged", err)
	}
}

// Close (the mount's unmount) ends the READs and STREAMs under way: their readers get an
// error instead of waiting for an owner that no longer matters.
func TestCloseCancelsBackgroundWork(t *testing.T) {
	o := newFakeOwner(4 << 20)
	o.block = true
	cf := cached(t, o.version())
	f := New(Options{Owner: o, ReadsInFlight: 2})
	f.Prefetch("f", cf, 0, 2<<20) // background READs, no reader waiting
	done := make(chan error, 2)
	go func() { done <- f.Fetch(context.Background(), "f", cf, 0, 1<<20, 0) }()
	go func() {
		_, err := f.ReadSequential(context.Background(), "f", cf, 3<<20, 4<<20, make([]byte, 1<<20))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	f.Close()
	for range 2 {
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("reader after Close: %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a reader still waits 5 s after Close")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for o.closed.Load() != o.streams.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if o.closed.Load() != o.streams.Load() {
		t.Errorf("%d of %d streams closed after Close", o.closed.Load(), o.streams.Load())
	}
	if err := f.Fetch(context.Background(), "f", cf, 0, 1<<20, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Fetch after Close: %v, want context.Canceled", err)
	}
}
