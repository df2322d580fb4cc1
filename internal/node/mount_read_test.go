//go:build linux

package node_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/peertest"
)

// readSequentially reads path with 1 MiB reads, as cp and cat do.
func readSequentially(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	if _, err := io.CopyBuffer(&out, f, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// cacheBypassingPages reads path whole with O_DIRECT: the daemon fetches it into its chunk
// cache, but the kernel keeps none of it in its page cache, so the next open of the complete
// file is served by passthrough rather than from the kernel's pages.
func cacheBypassingPages(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw := make([]byte, 1<<20+4096)
	buf := raw[4096-int(uintptr(unsafe.Pointer(&raw[0]))%4096):][:1<<20]
	var out bytes.Buffer
	if _, err := io.CopyBuffer(&out, struct{ io.Reader }{f}, buf); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestMountRereadFromPages: right after the kernel read a whole file through the mount,
// opening it again reads the kernel's own pages: the mount never tells the kernel to drop
// them and makes no passthrough open (which would make the kernel empty them first), so
// hardly a READ reaches the daemon. (Not none: these VMs page out memory that looks cold, and
// a page reclaimed between two re-reads is read again.) A change on the owner still empties
// them.
func TestMountRereadFromPages(t *testing.T) {
	m := mountShare(t)
	// Written aside and renamed into place: the owner's events for f.bin then carry only the
	// final version. An event for a half-written version, arriving late on a loaded machine,
	// would rightly make the mount drop the pages this test expects to be read.
	peertest.WriteRandomFile(t, filepath.Join(m.share, ".f.bin.tmp"), 8<<20+100, 23)
	if err := os.Rename(filepath.Join(m.share, ".f.bin.tmp"), filepath.Join(m.share, "f.bin")); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(m.share, "f.bin"))
	if got := readSequentially(t, filepath.Join(m.mnt, "f.bin")); !bytes.Equal(got, want) {
		t.Fatal("first read differs")
	}
	reads, pass, drops := opCalls(t, m, "read"), counter(t, m, "passthrough_opens"), counter(t, m, "page_drops")
	for i := 0; i < 3; i++ {
		if got := readSequentially(t, filepath.Join(m.mnt, "f.bin")); !bytes.Equal(got, want) {
			t.Fatalf("re-read %d differs", i+1)
		}
	}
	// Each re-read served by the daemon would take at least 9 READs (1 MiB at most each).
	r, p, d := opCalls(t, m, "read")-reads, counter(t, m, "passthrough_opens")-pass, counter(t, m, "page_drops")-drops
	if d != 0 || p != 0 || r >= 9 {
		t.Fatalf("re-reads: the mount dropped the pages %d times, made %d passthrough opens, and %d READs reached it; want 0, 0 and a few at most (pages the kernel reclaimed)", d, p, r)
	}
	peertest.WriteRandomFile(t, filepath.Join(m.share, "f.bin"), 8<<20+100, 24)
	want, _ = os.ReadFile(filepath.Join(m.share, "f.bin"))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if bytes.Equal(readSequentially(t, filepath.Join(m.mnt, "f.bin")), want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the mount still shows the old contents 5 s after the owner's change")
		}
	}
}

// TestMountIdlePagesGiveWayToPassthrough: the kernel's pages of a whole file are dropped
// once it stays closed for a few seconds, and the next open reads the chunk cache by
// passthrough, sending no READ either.
func TestMountIdlePagesGiveWayToPassthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the idle drop (5 s)")
	}
	m := mountShare(t)
	peertest.WriteRandomFile(t, filepath.Join(m.share, "f.bin"), 8<<20, 25)
	want, _ := os.ReadFile(filepath.Join(m.share, "f.bin"))
	if got := readSequentially(t, filepath.Join(m.mnt, "f.bin")); !bytes.Equal(got, want) {
		t.Fatal("first read differs")
	}
	time.Sleep(6 * time.Second)
	reads, pass := opCalls(t, m, "read"), counter(t, m, "passthrough_opens")
	if got := readSequentially(t, filepath.Join(m.mnt, "f.bin")); !bytes.Equal(got, want) {
		t.Fatal("re-read differs")
	}
	p := counter(t, m, "passthrough_opens") - pass
	if p == 0 && pass == 0 {
		t.Skip("the kernel refused FUSE passthrough here (needs CAP_SYS_ADMIN and a kernel with FUSE passthrough)")
	}
	if r := opCalls(t, m, "read") - reads; r != 0 || p != 1 {
		t.Fatalf("re-read after the idle drop sent %d READs and made %d passthrough opens; want 0 and 1", r, p)
	}
}

// TestMountSequentialReadStreams: a sequential reader is served by a STREAM that runs ahead of
// it, random reads by tagged READs, and both return the owner's bytes.
func TestMountSequentialReadStreams(t *testing.T) {
	m := mountShare(t)
	peertest.WriteRandomFile(t, filepath.Join(m.share, "seq.bin"), 40<<20+12345, 31)
	peertest.WriteRandomFile(t, filepath.Join(m.share, "rand.bin"), 24<<20, 32)

	want, _ := os.ReadFile(filepath.Join(m.share, "seq.bin"))
	if got := readSequentially(t, filepath.Join(m.mnt, "seq.bin")); !bytes.Equal(got, want) {
		t.Fatalf("sequential read through the mount: %d bytes, differ from the owner's %d", len(got), len(want))
	}
	streams := counter(t, m, "streams")
	if streams == 0 {
		t.Fatal("a sequential read of 40 MiB opened no STREAM")
	}

	// Random 64 KiB reads away from offset 0 (which counts as the start of a sequential read).
	want, _ = os.ReadFile(filepath.Join(m.share, "rand.bin"))
	f, err := os.Open(filepath.Join(m.mnt, "rand.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 64<<10)
	for i := 0; i < 50; i++ {
		off := (1 + rng.Int64N(int64(len(want))/int64(len(buf))-1)) * int64(len(buf))
		if _, err := f.ReadAt(buf, off); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, want[off:off+int64(len(buf))]) {
			t.Fatalf("random read at %d differs from the owner's bytes", off)
		}
	}
	if after := counter(t, m, "streams"); after > streams+2 {
		t.Errorf("50 random reads opened %d streams; random access should use READs", after-streams)
	}
}

// TestMountStreamSeesChange: a file rewritten on the owner while a sequential reader is
// halfway through is read again in its new version once the change event arrived; the
// stream of the old version never serves the new reader.
func TestMountStreamSeesChange(t *testing.T) {
	m := mountShare(t)
	owner := filepath.Join(m.share, "v.bin")
	peertest.WriteRandomFile(t, owner, 32<<20, 41)
	old, _ := os.ReadFile(owner)

	f, err := os.Open(filepath.Join(m.mnt, "v.bin"))
	if err != nil {
		t.Fatal(err)
	}
	half := make([]byte, 16<<20)
	if _, err := io.ReadFull(f, half); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !bytes.Equal(half, old[:len(half)]) {
		t.Fatal("first half differs from the owner's")
	}

	// Same size, new bytes: only the change event tells them apart.
	time.Sleep(20 * time.Millisecond) // a new mtime even on coarse clocks
	peertest.WriteRandomFile(t, owner, 32<<20, 42)
	now, _ := os.ReadFile(owner)
	deadline := time.Now().Add(2 * time.Second)
	for {
		got := readSequentially(t, filepath.Join(m.mnt, "v.bin"))
		if bytes.Equal(got, now) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 s after the owner rewrote the file the mount still serves other bytes (old version: %v)", bytes.Equal(got, old))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMountTimerFlush: data written to a file that stays open reaches the owner within a
// couple of seconds, without close or fsync.
func TestMountTimerFlush(t *testing.T) {
	m := mountShare(t)
	f, err := os.Create(filepath.Join(m.mnt, "log.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := []byte("written and left open\n")
	if _, err := f.Write(line); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(m.share, "log.txt"))
		if bytes.Equal(b, line) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("3 s after a write to an open file the owner has %q", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close after the timed flush: %v", err)
	}
}

// TestMountCachedReadableOffline: with the owner's daemon stopped, a file read before is
// still served whole from the cache (listing, stat, open and read need no round trip), and a
// file never read fails with an error within the wait bound.
func TestMountCachedReadableOffline(t *testing.T) {
	m := mountShare(t, func(p *api.MountParams) { p.WaitSeconds = 1; p.NoPassthrough = true })
	peertest.WriteRandomFile(t, filepath.Join(m.share, "seen.bin"), 6<<20, 61)
	peertest.WriteRandomFile(t, filepath.Join(m.share, "unseen.bin"), 6<<20, 62)
	want, _ := os.ReadFile(filepath.Join(m.share, "seen.bin"))
	if got := readSequentially(t, filepath.Join(m.mnt, "seen.bin")); !bytes.Equal(got, want) {
		t.Fatal("first read differs")
	}
	m.a.Stop()
	defer m.a.Restart()
	if ents, err := os.ReadDir(m.mnt); err != nil || len(ents) != 2 {
		t.Fatalf("listing offline: %d entries, %v", len(ents), err)
	}
	if got := readSequentially(t, filepath.Join(m.mnt, "seen.bin")); !bytes.Equal(got, want) {
		t.Fatal("the cached file read offline differs")
	}
	start := time.Now()
	if _, err := os.ReadFile(filepath.Join(m.mnt, "unseen.bin")); err == nil {
		t.Fatal("a file never read came back while its owner is down")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("the read of an uncached file took %v to fail", d)
	}
}

// TestMountReadsBackOwnWrites: small files written whole through the mount, then given their
// times and modes (as git clone, cp -p, rsync -a and tar do), read back with no READ:
// the mount keeps their contents. A file changed on the owner afterwards is read anew.
func TestMountReadsBackOwnWrites(t *testing.T) {
	m := mountShare(t)
	old := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
	want := map[string][]byte{}
	for i := range 20 {
		name := filepath.Join(m.mnt, fmt.Sprintf("f%d", i))
		data := bytes.Repeat([]byte{byte('a' + i)}, 100+i*150)
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(name, 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(name, old, old); err != nil {
			t.Fatal(err)
		}
		want[name] = data
	}
	time.Sleep(300 * time.Millisecond) // the owner's change events, echoes of these writes
	before := opCalls(t, m, "owner_read")
	for name, data := range want {
		if got, err := os.ReadFile(name); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s read back: %d bytes, %v", name, len(got), err)
		}
	}
	// Without the kept contents each file costs a READ. An event that overtakes the chmod and
	// utime of a file may still make the mount learn its new times from a lookup, which cannot
	// tell the contents are unchanged: allow that for a file or two on a slow machine.
	if n := opCalls(t, m, "owner_read") - before; n > 2 {
		t.Errorf("reading back 20 files written here cost %d READs", n)
	}
	// Changed on the owner: the event makes the mount read the new contents.
	f0 := filepath.Join(m.share, "f0")
	os.Chmod(f0, 0o644)
	if err := os.WriteFile(f0, []byte("changed on the owner"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		got, _ := os.ReadFile(filepath.Join(m.mnt, "f0"))
		if string(got) == "changed on the owner" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mount still shows %q", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
