package fusefs

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/cache"
	"github.com/peerfs/peerfs/internal/wire"
)

// rootOwner is an owner of an empty share that serves any file as zeros. The calls it
// leaves out are never made in these tests.
type rootOwner struct{ Owner }

func (rootOwner) Stat(ctx context.Context, path string) (wire.Entry, error) {
	return wire.Entry{Mode: wire.ModeDir | 0o755, Nlink: 2, Ino: 1}, nil
}

func (rootOwner) List(ctx context.Context, path string, inlineMax uint32, add func([]wire.Entry) error) error {
	return nil
}

func (rootOwner) Read(ctx context.Context, path string, off int64, dst []byte) (int, error) {
	clear(dst)
	return len(dst), nil
}

// The fetches of a mount stop with it: once its server ends (an unmount, here from outside
// as fusermount3 -u does), nothing more is asked of the owner for it.
func TestUnmountStopsFetching(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse: mount tests need FUSE (load the fuse module)")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("fusermount3 not found: install fuse3 (make deps)")
	}
	store, err := cache.Open(cache.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	r := New(Options{Peer: "p", Share: "s", Owner: rootOwner{}, Cache: store})
	srv, err := r.Mount(t.TempDir())
	if err != nil {
		t.Skipf("cannot mount here: %v", err)
	}
	cf, err := store.Get(r.key("f"), cache.Version{Size: 1000 * cache.ChunkSize, MtimeNs: 1, Ino: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Release()
	if err := r.fetch.Fetch(context.Background(), "f", cf, 0, cache.ChunkSize, 0); err != nil {
		t.Fatalf("fetch while mounted: %v", err)
	}
	if err := srv.Unmount(); err != nil {
		t.Fatal(err)
	}
	srv.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for i := int64(1); ; i++ { // a chunk not fetched yet each time (at most 500 of them)
		err := r.fetch.Fetch(context.Background(), "f", cf, i*cache.ChunkSize, (i+1)*cache.ChunkSize, 0)
		if errors.Is(err, context.Canceled) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fetch after the unmount: %v, want context.Canceled", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
