package fetch

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/cache"
)

// slowOwner serves Read from data; the first Read waits for release, so that other reads
// meet it in flight.
type slowOwner struct {
	Owner   // only Read is used
	data    []byte
	calls   atomic.Int32
	first   chan struct{} // closed when the first Read started
	release chan struct{}
}

func (o *slowOwner) Read(ctx context.Context, path string, off int64, dst []byte) (int, error) {
	if o.calls.Add(1) == 1 {
		close(o.first)
		<-o.release
	}
	return copy(dst, o.data[off:]), nil
}

// TestFetchJoinsOnlyWholePieces: a reader whose piece starts where a shorter READ in flight
// starts must not take its bytes from that READ (it would copy past the reply's end).
func TestFetchJoinsOnlyWholePieces(t *testing.T) {
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i/4096 + 1)
	}
	owner := &slowOwner{data: data, first: make(chan struct{}), release: make(chan struct{})}
	store := newStore(t)
	f := New(Options{Owner: owner, ReadsInFlight: 4})
	defer f.Close()
	cf, err := store.Get(key("f"), cache.Version{Size: int64(len(data)), MtimeNs: 1, Ino: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Release()

	short := make([]byte, cache.ChunkSize)
	long := make([]byte, 1<<20)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = f.ReadInto(context.Background(), "f", cf, 0, short) }()
	<-owner.first // the short piece is in flight
	go func() { defer wg.Done(); errs[1] = f.ReadInto(context.Background(), "f", cf, 0, long) }()
	time.Sleep(50 * time.Millisecond) // let the long reader meet the short READ in flight
	close(owner.release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("reader %d: %v", i, err)
		}
	}
	if !bytes.Equal(short, data[:len(short)]) {
		t.Error("the short reader got other bytes than the owner's")
	}
	if !bytes.Equal(long, data[:len(long)]) {
		t.Error("the long reader got other bytes than the owner's")
	}
}

// TestFetchFillsItsOwnCopy: a copy of a version dropped (the mount's own write left the file's
// size and mtime as they were, at the file system's timestamp granularity) and made again
// is filled by a fetch, also while a READ for the dropped copy is in flight. Joining that
// READ once left the new copy without the range, and the READ that asked failed with EIO
// ("cache: range not present").
func TestFetchFillsItsOwnCopy(t *testing.T) {
	data := bytes.Repeat([]byte("peerfs"), 200_000)
	owner := &slowOwner{data: data, first: make(chan struct{}), release: make(chan struct{})}
	store := newStore(t)
	f := New(Options{Owner: owner, ReadsInFlight: 4})
	defer f.Close()
	v := cache.Version{Size: int64(len(data)), MtimeNs: 1, Ino: 1}
	old, err := store.Get(key("f"), v)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Release()
	f.Prefetch("f", old, 0, cache.ChunkSize) // a readahead READ for the old copy
	<-owner.first
	store.Invalidate(key("f"))
	cf, err := store.Get(key("f"), v)
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Release()
	done := make(chan error, 1)
	go func() { done <- f.Fetch(context.Background(), "f", cf, 0, cache.ChunkSize, cache.ChunkSize) }()
	time.Sleep(50 * time.Millisecond) // let the fetch meet the READ in flight
	close(owner.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := make([]byte, cache.ChunkSize)
	if _, err := cf.ReadAt(got, 0); err != nil {
		t.Fatalf("the range fetched for the new copy: %v", err)
	}
	if !bytes.Equal(got, data[:len(got)]) {
		t.Fatal("the new copy holds other bytes than the owner's")
	}
}
