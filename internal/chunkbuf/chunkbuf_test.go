package chunkbuf

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestBulkBuffers: buffers are Len long, page-aligned and distinct while held; a buffer
// given back is handed out again before a new region is mapped; at the arena's limit it hands
// out none (Get then takes the heap) and refuses buffers it never gave.
func TestBulkBuffers(t *testing.T) {
	a := &arena{trimAfter: time.Hour}
	var held [][]byte
	seen := map[*byte]bool{}
	for len(a.regions)*arenaRegion < arenaMax {
		b := a.get()
		if b == nil {
			t.Fatalf("arena refused a buffer after %d regions", len(a.regions))
		}
		if len(b) != Len || cap(b) != Len || !Aligned(b) {
			t.Fatalf("buffer of len %d cap %d, aligned %v", len(b), cap(b), Aligned(b))
		}
		if seen[&b[0]] {
			t.Fatal("a buffer handed out twice")
		}
		seen[&b[0]] = true
		b[0], b[Len-1] = 1, 2 // all of it is writable
		held = append(held, b)
		if len(held) == 3 && len(a.regions) != 1 {
			t.Fatalf("%d regions for 3 buffers", len(a.regions))
		}
	}
	// Drain the last region.
	for b := a.get(); b != nil; b = a.get() {
		held = append(held, b)
	}
	if want := arenaMax / arenaRegion * (arenaRegion / Len); len(held) != want {
		t.Fatalf("arena held %d buffers, want %d", len(held), want)
	}
	if a.put(make([]byte, Len)) {
		t.Fatal("the arena took back a buffer it never gave")
	}
	// Giving one back from the middle: the next get returns exactly it.
	mid := held[len(held)/2]
	if !a.put(mid) {
		t.Fatal("the arena did not take back its own buffer")
	}
	if b := a.get(); &b[0] != &mid[0] {
		t.Fatal("a returned buffer was not handed out again")
	}
	for _, b := range held {
		if !a.put(b) {
			t.Fatal("the arena did not take back its own buffer")
		}
	}
	for _, r := range a.regions {
		if r.used != 0 || len(r.free) != arenaRegion/Len {
			t.Fatalf("region with %d used, %d free after everything came back", r.used, len(r.free))
		}
	}
	// The first region is used first again.
	if b := a.get(); offsetIn(a.regions[0].mem, &b[0]) != 0 {
		t.Fatal("after all came back, the first buffer was not the first region's first")
	}

	// The package's own: Get, and Put of a reslice.
	g := Get()
	if len(g) != Len || !Aligned(g) {
		t.Fatalf("Get: len %d, aligned %v", len(g), Aligned(g))
	}
	Put(g[:10])
}

// TestBulkTrim: a region whose buffers all came back gives its memory back after trimAfter
// (the next use sees zeroed memory), and one in use keeps it.
func TestBulkTrim(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the arena maps memory on Linux only")
	}
	a := &arena{trimAfter: 50 * time.Millisecond}
	b := a.get()
	b2 := a.get()
	copy(b, "kept while in use")
	copy(b2, "given back")
	a.put(b2)
	time.Sleep(200 * time.Millisecond)
	if !bytes.HasPrefix(b, []byte("kept while in use")) || a.regions[0].trimmed {
		t.Fatal("a region with a buffer in use was trimmed")
	}
	a.put(b)
	deadline := time.Now().Add(5 * time.Second)
	for {
		a.mu.Lock()
		trimmed := a.regions[0].trimmed
		a.mu.Unlock()
		if trimmed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an idle region was not trimmed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := a.get()
	if &c[0] != &b[0] || c[0] != 0 || c[Len/2] != 0 {
		t.Fatal("a trimmed region's memory was not given back (or a different buffer came)")
	}
	if a.regions[0].trimmed {
		t.Fatal("a region in use again still counts as trimmed")
	}
}

// TestBulkHugePages reports whether this machine's kernel backs the arena with huge pages,
// which is what makes O_DIRECT from it fast; it cannot fail, since THP may be off.
func TestBulkHugePages(t *testing.T) {
	a := &arena{trimAfter: time.Hour}
	var held [][]byte
	for range arenaRegion / Len {
		b := a.get()
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		held = append(held, b)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	huge := "no AnonHugePages line"
	for _, l := range strings.Split(string(smaps), "\n") {
		if strings.HasPrefix(l, "AnonHugePages:") && !strings.HasSuffix(l, " 0 kB") {
			huge = l
		}
	}
	t.Logf("THP %s; a mapping with huge pages: %s", strings.TrimSpace(string(thp)), huge)
}
