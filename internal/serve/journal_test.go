package serve

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/sharetest"
	"github.com/peerfs/peerfs/internal/wire"
)

// newStore opens a journal store in dir whose batches wait briefly for the ones before them.
func newStore(t *testing.T, dir string) *JournalStore {
	t.Helper()
	s, err := NewJournalStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.gapWait = 300 * time.Millisecond
	return s
}

// TestJournalSweep: records unused for 30 days are removed when the store opens.
func TestJournalSweep(t *testing.T) {
	dir := t.TempDir()
	old, fresh := filepath.Join(dir, "s1", "old"), filepath.Join(dir, "s2", "fresh")
	for _, f := range []string{old, fresh} {
		sharetest.Mkdirs(t, filepath.Dir(f))
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-31 * 24 * time.Hour)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	newStore(t, dir)
	if _, err := os.Stat(filepath.Dir(old)); !os.IsNotExist(err) {
		t.Errorf("an old record's directory survived: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh record was removed: %v", err)
	}
}

// TestFileStates: the states remembered are bounded, the oldest forgotten first; a rename
// moves a directory's paths with it.
func TestFileStates(t *testing.T) {
	f := newFileStates(3)
	for i, p := range []string{"a", "b", "c", "a", "d"} {
		f.set(p, wire.FileState{Size: uint64(i)})
	}
	if _, ok := f.get("b"); ok {
		t.Error("b, the oldest, is still remembered")
	}
	for p, size := range map[string]uint64{"a": 3, "c": 2, "d": 4} {
		if st, ok := f.get(p); !ok || st.Size != size {
			t.Errorf("%s: %+v, %v; want size %d", p, st, ok, size)
		}
	}
	f = newFileStates(10)
	f.set("dir/x", wire.FileState{Size: 1})
	f.set("dir2", wire.FileState{Size: 2})
	f.move("dir", "new")
	if _, ok := f.get("dir/x"); ok {
		t.Error("dir/x is still remembered after its directory moved")
	}
	if st, ok := f.get("new/x"); !ok || st.Size != 1 {
		t.Errorf("new/x: %+v, %v", st, ok)
	}
	if _, ok := f.get("dir2"); !ok {
		t.Error("dir2 moved with dir")
	}
	for i := range 10_000 { // stale order entries are compacted
		f.set("same", wire.FileState{Size: uint64(i)})
	}
	if len(f.order) > 2*f.max+1024 {
		t.Errorf("%d order entries for %d paths", len(f.order), len(f.m))
	}
}
