package transfer

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/rootfs"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/wire"
)

// randomFile writes size pseudo-random bytes to path.
func randomFile(t *testing.T, path string, size int, seed uint64) []byte {
	t.Helper()
	b := make([]byte, size)
	r := rand.NewChaCha8([32]byte{byte(seed)})
	r.Read(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// checkNoSpace fails unless err is a clear ENOSPC: its text says how much was needed and how
// much is free.
func checkNoSpace(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want ENOSPC", what)
	}
	var re *wire.RemoteError
	if !errors.Is(err, syscall.ENOSPC) && !(errors.As(err, &re) && re.Code == wire.ENOSPC) {
		t.Fatalf("%s: %v, want ENOSPC", what, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "needed") || !strings.Contains(msg, "free") {
		t.Errorf("%s: message %q does not say how much is needed and how much is free", what, msg)
	}
}

// sameFree fails unless the free space of dir is what it was (within 64 KiB, for the
// directory blocks a file system may keep after a name came and went).
func sameFree(t *testing.T, what, dir string, before int64) {
	t.Helper()
	if after := freeBytes(t, dir); before-after > 64<<10 {
		t.Errorf("%s: free space went from %d to %d bytes: a refused transfer kept %d", what, before, after, before-after)
	}
}

// TestSendIntoFullShare: a send larger than the owner's free space fails with a message that
// says so and leaves the free space as it was, so a send that fits succeeds after it. A PUT
// announcing far more than the disk holds is refused before any data; one abandoned by its
// sender keeps its bytes for a resume but not the rest of its reservation.
func TestSendIntoFullShare(t *testing.T) {
	for _, kind := range fsKinds {
		t.Run(kind, func(t *testing.T) { sendIntoFullShare(t, kind) })
	}
}

func sendIntoFullShare(t *testing.T, kind string) {
	dst := smallFS(t, kind, 48)
	src := t.TempDir()
	big := filepath.Join(src, "big.bin")
	randomFile(t, big, 60<<20, 1)
	small := filepath.Join(src, "small.bin")
	want := randomFile(t, small, 20<<20, 2)
	peer := servePeer(t, "inbox", dst)
	ctx := context.Background()

	free := freeBytes(t, dst)
	_, err := Send(ctx, peer, big, "inbox", "", Options{})
	checkNoSpace(t, "send of 60 MiB", err)
	sameFree(t, "send of 60 MiB", dst, free)
	noParts(t, dst)

	if _, err := Send(ctx, peer, small, "inbox", "", Options{}); err != nil {
		t.Fatalf("send of 20 MiB after the refused one: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(dst, "small.bin")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("small.bin on the owner: %v", err)
	}

	free = freeBytes(t, dst)
	_, _, err = peer.Put(ctx, wire.PutReq{Share: "inbox", Path: "huge.bin", Size: 1 << 40, Mode: 0o644})
	checkNoSpace(t, "PUT announcing 1 TiB", err)
	_, _, err = peer.Put(ctx, wire.PutReq{Share: "inbox", Path: "huge.bin", Size: 1<<64 - 1, Mode: 0o644})
	if code := remoteErrno(err); code != wire.EFBIG {
		t.Errorf("PUT announcing 2^64-1 bytes: %v, want EFBIG", err)
	}
	sameFree(t, "refused PUTs", dst, free)
	noParts(t, dst)

	// A PUT of 16 MiB that fits, abandoned after its first 1 MiB.
	_, out, err := peer.Put(ctx, wire.PutReq{Share: "inbox", Path: "gone.bin", Size: 16 << 20, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	const chunk = 64 << 10
	for off := uint64(0); off < 1<<20; off += chunk {
		buf := rpc.GetBuffer(wire.DataHeaderLen + chunk)
		if err := out.Send(buf, off); err != nil {
			t.Fatal(err)
		}
	}
	out.Abort()
	// The owner writes what it took off the link before the abort and drops the frames still
	// queued, so the part file holds at most the 1 MiB sent; what matters is that the 16 MiB
	// reservation is given back.
	part := filepath.Join(dst, ".gone.bin"+rootfs.PartSuffix)
	var st syscall.Stat_t
	if !waitFor(func() bool {
		return syscall.Stat(part, &st) == nil && st.Size <= 1<<20 && st.Blocks*512 <= 2<<20
	}) {
		t.Errorf("an abandoned 16 MiB PUT of at most 1 MiB sent: its part file is %d bytes long and holds %d bytes of the disk 10 s later",
			st.Size, st.Blocks*512)
	}
	if before, after := free, freeBytes(t, dst); before-after > 2<<20 {
		t.Errorf("an abandoned 16 MiB PUT holding 1 MiB keeps %d bytes of the disk", before-after)
	}
}

// waitFor polls cond for up to ten seconds (the owner notices an abandoned stream on its own)
// and reports whether it came true.
func waitFor(cond func() bool) bool {
	for range 1000 {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// TestPullIntoFullDisk: a pull larger than the local free space fails with a message that says
// so and leaves the free space as it was and no part file, so a pull that fits succeeds after.
func TestPullIntoFullDisk(t *testing.T) {
	for _, kind := range fsKinds {
		t.Run(kind, func(t *testing.T) { pullIntoFullDisk(t, kind) })
	}
}

func pullIntoFullDisk(t *testing.T, kind string) {
	dst := smallFS(t, kind, 48)
	src := t.TempDir()
	randomFile(t, filepath.Join(src, "big.bin"), 60<<20, 3)
	want := randomFile(t, filepath.Join(src, "small.bin"), 20<<20, 4)
	peer := servePeer(t, "data", src)
	ctx := context.Background()

	free := freeBytes(t, dst)
	_, err := Pull(ctx, peer, "data", "big.bin", dst, Options{})
	checkNoSpace(t, "pull of 60 MiB", err)
	sameFree(t, "pull of 60 MiB", dst, free)
	noParts(t, dst)

	if _, err := Pull(ctx, peer, "data", "small.bin", dst, Options{}); err != nil {
		t.Fatalf("pull of 20 MiB after the refused one: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(dst, "small.bin")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("small.bin pulled: %v", err)
	}
}
