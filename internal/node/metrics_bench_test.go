//go:build linux

package node_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/peertest"
)

// BenchmarkMountCachedRead4K reads 4 KiB pieces of a file the daemon has in its chunk
// cache, with O_DIRECT and without passthrough: every read is a FUSE request the daemon
// answers from its cache, the cheapest request it serves, where the cost of timing it
// (fusefs/timing.go) shows most. The FUSE server runs in this process, so allocs/op counts
// its allocations too.
//
//	go test -run '^$' -bench MountCachedRead4K ./internal/node/
func BenchmarkMountCachedRead4K(b *testing.B) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		b.Skip("no /dev/fuse: the benchmark needs FUSE")
	}
	a, be := peertest.Pair(b)
	share, mnt := b.TempDir(), b.TempDir()
	a.Share("m", share, false, "beta")
	peertest.WriteRandomFile(b, filepath.Join(share, "f.bin"), 1<<20, 3)
	if _, err := be.N.Mount(b.Context(), api.MountParams{Peer: "alpha", Share: "m", Dir: mnt, NoPassthrough: true}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.N.Unmount(b.Context(), api.UnmountParams{Dir: mnt}) })
	f, err := os.OpenFile(filepath.Join(mnt, "f.bin"), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	raw := make([]byte, 2*4096)
	buf := raw[4096-int(uintptr(unsafe.Pointer(&raw[0]))%4096):][:4096]
	for off := int64(0); off < 1<<20; off += 4096 { // fetch it all into the cache
		if _, err := f.ReadAt(buf, off); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	off := int64(0)
	for b.Loop() {
		if _, err := f.ReadAt(buf, off); err != nil {
			b.Fatal(err)
		}
		off = (off + 4096) % (1 << 20)
	}
}
