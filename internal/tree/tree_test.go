package tree

import (
	"testing"

	"github.com/peerfs/peerfs/internal/wire"
)

func file(name string, size uint64) wire.Entry {
	return wire.Entry{Name: name, Mode: wire.ModeRegular | 0o644, Size: size}
}

func TestReplicaLookupAndInvalidate(t *testing.T) {
	r := New()
	if _, _, listed := r.Lookup("", "a"); listed {
		t.Fatal("an unlisted directory answered")
	}
	r.SetDir("", []wire.Entry{file("a", 1), {Name: "d", Mode: wire.ModeDir | 0o755}})
	r.SetDir("d", []wire.Entry{file("x", 2)})
	if e, found, listed := r.Lookup("", "a"); !found || !listed || e.Size != 1 {
		t.Fatalf("lookup a: %+v %v %v", e, found, listed)
	}
	if _, found, listed := r.Lookup("", "missing"); found || !listed {
		t.Fatal("a missing name in a listed directory must be an authoritative miss")
	}
	// An event on a: forget it, do not conclude; the directory stays listed.
	r.Invalidate("a")
	if _, _, listed := r.Lookup("", "a"); listed {
		t.Fatal("an invalidated name answered from the replica")
	}
	if !r.DirListed("") {
		t.Fatal("invalidating one name dropped its directory")
	}
	if _, ok := r.Entries(""); ok {
		t.Fatal("a listing with forgotten names was served for readdir")
	}
	r.Put("a", file("a", 9))
	if e, _, listed := r.Lookup("", "a"); !listed || e.Size != 9 {
		t.Fatalf("after Put: %+v", e)
	}
	// A directory's own change keeps its listing.
	r.InvalidateEntry("d")
	if _, found, _ := r.Lookup("d", "x"); !found {
		t.Fatal("InvalidateEntry dropped the directory's listing")
	}
	r.Invalidate("d")
	if r.DirListed("d") {
		t.Fatal("Invalidate kept the listing below")
	}
}

func TestReplicaRename(t *testing.T) {
	r := New()
	r.SetDir("", []wire.Entry{{Name: "src", Mode: wire.ModeDir | 0o755}, file("f", 3)})
	r.SetDir("src", []wire.Entry{file("in", 4)})
	r.Rename("src", "dst")
	if _, found, _ := r.Lookup("", "src"); found {
		t.Fatal("old name still present")
	}
	if e, found, _ := r.Lookup("dst", "in"); !found || e.Size != 4 {
		t.Fatal("listing did not move with the directory")
	}
	r.Rename("f", "g")
	if e, found, _ := r.Lookup("", "g"); !found || e.Name != "g" || e.Size != 3 {
		t.Fatalf("renamed file: %+v %v", e, found)
	}
	r.Remove("g")
	if _, found, listed := r.Lookup("", "g"); found || !listed {
		t.Fatal("removed name still present")
	}
}
