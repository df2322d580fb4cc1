package node_test

import (
	"fmt"
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
	time.Sleep(300 * time.Millisecond) // the owner's events for them arrive (20 ms coalescing)
	before := counter(t, m, "round_trips")
	for i := 0; i < n; i++ {
		if _, err := os.Lstat(filepath.Join(dir, fmt.Sprint("f", i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := counter(t, m, "round_trips") - before; got != 0 {
		t.Errorf("stat of %d files this mount just wrote made %d round trips, want 0", n, got)
	}
	before = counter(t, m, "round_trips")
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
