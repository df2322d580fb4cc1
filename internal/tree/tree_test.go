package tree

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

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

// TestInlineBudget: past the budget, the inline contents of the directories listed longest
// ago are dropped (their entries stay), and the accounting follows every change.
func TestInlineBudget(t *testing.T) {
	r := New()
	r.InlineBudget = 10 << 10
	listing := func(n int) []wire.Entry {
		var es []wire.Entry
		for i := range n {
			es = append(es, wire.Entry{Name: fmt.Sprintf("f%d", i), Mode: wire.ModeRegular | 0o644, Size: 1024,
				HasData: true, Data: make([]byte, 1024)})
		}
		return es
	}
	r.SetDir("old", listing(4))
	time.Sleep(time.Millisecond)
	r.SetDir("mid", listing(4))
	time.Sleep(time.Millisecond)
	r.SetDir("new", listing(4)) // 12 KiB in all: over the budget
	if e, ok := r.Stat("old/f0"); !ok || e.HasData || e.Size != 1024 {
		t.Errorf("the oldest listing keeps %+v (ok %v); want its entry without contents", e.HasData, ok)
	}
	if e, ok := r.Stat("new/f0"); !ok || !e.HasData || len(e.Data) != 1024 {
		t.Error("the newest listing lost its contents")
	}
	if r.inline > r.InlineBudget {
		t.Errorf("%d bytes of contents kept, budget %d", r.inline, r.InlineBudget)
	}
	r.Put("new/f0", wire.Entry{Mode: wire.ModeRegular | 0o644, Size: 5})
	r.Remove("new/f1")
	r.Rename("new/f2", "mid/g")
	r.Forget("mid")
	r.InvalidateEntry("new/f3")
	if sum := heldInline(r); sum != r.inline {
		t.Errorf("accounting says %d bytes, the entries hold %d", r.inline, sum)
	}
	r.Forget("")
	if r.inline != 0 {
		t.Errorf("%d bytes counted after forgetting everything", r.inline)
	}
}

// TestInlineSurvivesMetadataEvents: an entry forgotten on an event gets its inline contents
// back when it is learnt again with the same contents (a chmod), not when they changed.
func TestInlineSurvivesMetadataEvents(t *testing.T) {
	r := New()
	e := wire.Entry{Name: "f", Mode: wire.ModeRegular | 0o644, Size: 5, MtimeNs: 7, Ino: 3, HasData: true, Data: []byte("hello")}
	r.SetDir("", []wire.Entry{e})
	r.Invalidate("f")
	chmod := e
	chmod.Mode, chmod.HasData, chmod.Data = wire.ModeRegular|0o444, false, nil
	r.Put("f", chmod)
	if got, ok := r.Stat("f"); !ok || string(got.Data) != "hello" || got.Mode != chmod.Mode {
		t.Errorf("after a chmod: %+v", got)
	}
	r.Invalidate("f")
	changed := chmod
	changed.MtimeNs = 8
	r.Put("f", changed)
	if got, _ := r.Stat("f"); got.HasData {
		t.Error("contents kept across a change of the file")
	}
	if sum := heldInline(r); sum != r.inline {
		t.Errorf("accounting says %d bytes, the entries hold %d", r.inline, sum)
	}
}

// TestReplicaOwnChanges: the mount's own namespace changes move a directory's times and link
// count at once, a rename moves the ctime of what moved, and a hard link's count is set under
// every name listed for it.
func TestReplicaOwnChanges(t *testing.T) {
	r := New()
	r.Put("", wire.Entry{Mode: wire.ModeDir | 0o755, Nlink: 2, MtimeNs: 10, CtimeNs: 10})
	r.SetDir("", []wire.Entry{{Name: "d", Mode: wire.ModeDir | 0o755, Nlink: 2, MtimeNs: 10, CtimeNs: 10},
		{Name: "a", Mode: wire.ModeRegular | 0o644, Ino: 7, Nlink: 2, CtimeNs: 10, Data: []byte("x"), HasData: true, Size: 1}})
	r.SetDir("d", []wire.Entry{{Name: "b", Mode: wire.ModeRegular | 0o644, Ino: 7, Nlink: 2, CtimeNs: 10}})
	r.DirChanged("d", +1, 20)
	if e, _ := r.Stat("d"); e.MtimeNs != 20 || e.CtimeNs != 20 || e.Nlink != 3 {
		t.Fatalf("d after a mkdir in it: %+v", e)
	}
	r.DirChanged("d", -1, 15) // a time earlier than what is known never moves it back
	if e, _ := r.Stat("d"); e.MtimeNs != 20 || e.Nlink != 2 {
		t.Fatalf("d after an rmdir in it: %+v", e)
	}
	r.DirChanged("", 0, 30)
	if e, _ := r.Stat(""); e.MtimeNs != 30 || e.CtimeNs != 30 || e.Nlink != 2 {
		t.Fatalf("root after a create in it: %+v", e)
	}
	r.SetLinks(7, 1, 40)
	for _, p := range []string{"a", "d/b"} {
		if e, _ := r.Stat(p); e.Nlink != 1 || e.CtimeNs != 40 {
			t.Fatalf("%s after an unlink of one of its names: %+v", p, e)
		}
	}
	r.Touched("a", 50)
	if e, _ := r.Stat("a"); e.CtimeNs != 50 || !e.HasData {
		t.Fatalf("a after a rename: %+v", e)
	}
}

// A listing comes sorted by name, with each entry's type and inode number.
func TestEntriesSortedSmall(t *testing.T) {
	r := New()
	r.SetDir("d", []wire.Entry{
		{Name: "b", Mode: wire.ModeDir | 0o755, Ino: 2},
		{Name: "c", Mode: wire.ModeSymlink | 0o777, Ino: 3, Target: "b"},
		{Name: "a", Mode: wire.ModeRegular | 0o644, Ino: 1, Data: []byte("x"), HasData: true},
	})
	got, ok := r.Entries("d")
	want := []DirEntry{{"a", wire.ModeRegular | 0o644, 1}, {"b", wire.ModeDir | 0o755, 2}, {"c", wire.ModeSymlink | 0o777, 3}}
	if !ok || !slices.Equal(got, want) {
		t.Fatalf("Entries = %v, %v; want %v", got, ok, want)
	}
}

// The replica keeps entries folded (entry); every field of every type must come back as it
// went in.
func TestEntriesKeepEveryField(t *testing.T) {
	in := []wire.Entry{
		{Name: "file", Mode: wire.ModeRegular | 0o4755, Size: 3, MtimeNs: 1, AtimeNs: 2, CtimeNs: 3, Ino: 4, Nlink: 2, UID: 5, GID: 6, Data: []byte("abc"), HasData: true},
		{Name: "empty", Mode: wire.ModeRegular | 0o600, HasData: true, Data: []byte{}},
		{Name: "big", Mode: wire.ModeRegular | 0o644, Size: 1 << 40, Ino: 7, Nlink: 1},
		{Name: "link", Mode: wire.ModeSymlink | 0o777, Size: 9, Target: "../target", Ino: 8, Nlink: 1},
		{Name: "tty", Mode: wire.ModeChar | 0o620, Rdev: 0x8801, Ino: 9, Nlink: 1},
		{Name: "null", Mode: wire.ModeChar | 0o666, Rdev: 0, Ino: 10, Nlink: 1},
		{Name: "sub", Mode: wire.ModeDir | 0o1777, Ino: 11, Nlink: 3},
	}
	r := New()
	r.SetDir("d", in)
	for _, want := range in {
		got, found, listed := r.Lookup("d", want.Name)
		if !found || !listed {
			t.Fatalf("%s: found %v listed %v", want.Name, found, listed)
		}
		if len(want.Data) == 0 && want.HasData {
			want.Data = nil // an empty file's contents come back as nil, still HasData
			got.Data = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, want %+v", want.Name, got, want)
		}
	}
}

// heldInline sums the inline contents the replica's entries and spares hold.
func heldInline(r *Replica) int64 {
	var sum int64
	for _, d := range r.dirs {
		for _, e := range d.entries {
			sum += e.inlineLen()
		}
	}
	for _, e := range r.spare {
		sum += int64(len(e.Data))
	}
	return sum
}
