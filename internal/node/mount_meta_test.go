//go:build linux

package node_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestMountOwnChangesCostNoLookups: the owner's change events that only echo this mount's
// own creates and writes leave the mount's metadata in place, so stat and unlink of those
// files afterwards make no extra round trip (one UNLINK each, no LOOKUP).
func TestMountOwnChangesCostNoLookups(t *testing.T) {
	m := mountShare(t)
	dir := filepath.Join(m.mnt, "own")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := 0; i < n; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The owner's events for them arrive after 20 ms of coalescing, or later under load: the
	// folder's event may make the first pass of stats ask once. A pass at 0 round trips must
	// come soon; one that asks every time is what this catches.
	var got int64
	for pass, deadline := 0, time.Now().Add(10*time.Second); ; pass++ {
		before := counter(t, m, "round_trips")
		for i := 0; i < n; i++ {
			if _, err := os.Lstat(filepath.Join(dir, fmt.Sprint("f", i))); err != nil {
				t.Fatal(err)
			}
		}
		if got = counter(t, m, "round_trips") - before; got == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stat of %d files this mount just wrote made %d round trips on pass %d, want a pass with 0", n, got, pass+1)
		}
		time.Sleep(100 * time.Millisecond)
	}
	before := counter(t, m, "round_trips")
	for i := 0; i < n; i++ {
		if err := os.Remove(filepath.Join(dir, fmt.Sprint("f", i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := counter(t, m, "round_trips") - before; got != n {
		t.Errorf("removing %d files made %d round trips, want %d (one UNLINK each)", n, got, n)
	}
	if left, _ := os.ReadDir(filepath.Join(m.share, "own")); len(left) != 0 {
		t.Fatalf("%d files left on the owner", len(left))
	}
}

// TestMountLargeWriteKeepsPages: the owner's change events that arrive while a large file is
// written through the mount, and after, name states the mount's own WRITEs left the file in
// (often before their replies arrive): they keep the kernel's pages and the mount's view of
// the file. Reading the file back right after sends no READ, and stat no request.
func TestMountLargeWriteKeepsPages(t *testing.T) {
	m := mountShare(t)
	const size = 48 << 20 // many write-behind flushes, over several 20 ms event windows
	want := make([]byte, size)
	rand.NewChaCha8([32]byte{9}).Read(want)
	drops := counter(t, m, "page_drops")
	f, err := os.Create(filepath.Join(m.mnt, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < size; off += 1 << 20 {
		if _, err := f.Write(want[off : off+1<<20]); err != nil {
			t.Fatal(err)
		}
		if off%(8<<20) == 0 {
			time.Sleep(25 * time.Millisecond) // let events arrive mid-write on a fast machine too
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the last events arrive (20 ms coalescing)
	trips := counter(t, m, "round_trips")
	if fi, err := os.Stat(filepath.Join(m.mnt, "big.bin")); err != nil || fi.Size() != size {
		t.Fatalf("stat: %v, %v", fi, err)
	}
	if n := counter(t, m, "round_trips") - trips; n != 0 {
		t.Errorf("stat of a file just written made %d round trips, want 0", n)
	}
	reads := opCalls(t, m, "read")
	got, err := os.ReadFile(filepath.Join(m.mnt, "big.bin"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, %v; want the %d written", len(got), err, size)
	}
	// The mount never told the kernel to drop the file's pages. (The READs the read-back
	// sends are no test: the kernel may reclaim pages on its own, and these VMs page out
	// memory that looks cold.)
	if d := counter(t, m, "page_drops") - drops; d != 0 {
		t.Errorf("the mount dropped the kernel's pages %d times while and after a file was written through it; want 0 (READs on reading it back: %d of 48 MiB)",
			d, opCalls(t, m, "read")-reads)
	}
	if onOwner, _ := os.ReadFile(filepath.Join(m.share, "big.bin")); !bytes.Equal(onOwner, want) {
		t.Fatal("the owner's copy differs")
	}
}

// TestMountOwnerMkdirAppears: a directory made on the owner's disk appears in the mount as
// soon as its change event arrives, also when the mount looked its name up before (it once
// stayed missing for the kernel's negative timeout, 10 s).
func TestMountOwnerMkdirAppears(t *testing.T) {
	m := mountShare(t)
	for _, name := range []string{"dir", "file"} {
		if _, err := os.Stat(filepath.Join(m.mnt, name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s before it exists: %v", name, err)
		}
		var err error
		if name == "dir" {
			err = os.Mkdir(filepath.Join(m.share, name), 0o755)
		} else {
			err = os.WriteFile(filepath.Join(m.share, name), nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(3 * time.Second)
		for {
			_, err := os.Stat(filepath.Join(m.mnt, name))
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s made on the owner is still missing in the mount after 3 s: %v", name, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
