package cache

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPersistence(t *testing.T) {
	dir := t.TempDir()
	const size = 2*cs + cs/2
	v := Version{Size: size, MtimeNs: 1700000000123456789, Ino: 42}
	s, _ := openStore(t, dir, 0)
	f := get(t, s, testKey, v)
	writeChunks(t, f, 0, 2)
	f.Release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, logs := openStore(t, dir, 0)
	if b, n := s.Usage(); b != cs+cs/2 || n != 1 {
		t.Fatalf("usage after reopen = %d bytes, %d files", b, n)
	}
	f = get(t, s, testKey, v)
	if got, want := f.Missing(0, size), []Range{{cs, cs}}; !slices.Equal(got, want) {
		t.Fatalf("Missing after reopen = %v, want %v", got, want)
	}
	checkRead(t, f, 0, cs)
	checkRead(t, f, 2*cs, cs/2)
	writeChunks(t, f, 1)
	if !f.Complete() {
		t.Fatal("not complete")
	}
	f.Release()
	if l := logs.lines(); l != nil {
		t.Fatalf("clean reopen logged: %q", l)
	}

	// Another version of the key: the old data is gone.
	f = get(t, s, testKey, Version{Size: size, MtimeNs: v.MtimeNs + 1, Ino: 42})
	if f.Present(0, 1) {
		t.Fatal("a new version sees the old data")
	}
	f.Release()
	if b, n := s.Usage(); b != 0 || n != 1 {
		t.Fatalf("usage after version change = %d bytes, %d files", b, n)
	}
}

// TestReleaseSaves checks that the last Release gets the record saved promptly, without Close.
func TestReleaseSaves(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir, 0)
	f := get(t, s, testKey, Version{Size: cs})
	writeChunks(t, f, 0)
	name := filepath.Join(dir, "data", hashKey(testKey).String())
	f.Release()
	waitFor(t, "the record", func() bool {
		_, err := os.Stat(name + ".map")
		return err == nil
	})
	// Saved and unreferenced: its data file is closed until the next Get.
	waitFor(t, "the data file to close", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.mu.entries[hashKey(testKey)].file == nil
	})
	f = get(t, s, testKey, Version{Size: cs})
	defer f.Release()
	checkRead(t, f, 0, cs)
}

// TestCrash copies the cache directory while the store is running, as a crash would leave it,
// and opens the copy: only what was saved is trusted.
func TestCrash(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir, 0)
	const size = 4 * cs
	f := get(t, s, testKey, Version{Size: size})
	defer f.Release()
	writeChunks(t, f, 0, 1)
	if err := s.flush(flushDue); err != nil {
		t.Fatal(err)
	}
	// Hold off the flush loop until the copy is taken, however slow the machine.
	s.flushMu.Lock()
	writeChunks(t, f, 2) // written, not yet saved
	k2 := Key{Peer: "PEER", Share: "projects", Path: "never-saved"}
	g := get(t, s, k2, Version{Size: cs})
	defer g.Release()
	writeChunks(t, g, 0)

	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	s.flushMu.Unlock()
	// A save interrupted between writing and renaming its temp file.
	tmp := filepath.Join(crashed, "data", hashKey(testKey).String()+".tmp")
	if err := os.WriteFile(tmp, []byte("half a rec"), 0o600); err != nil {
		t.Fatal(err)
	}

	s2, logs := openStore(t, crashed, 0)
	if b, n := s2.Usage(); b != 2*cs || n != 1 {
		t.Fatalf("after crash: %d bytes, %d files; want %d, 1", b, n, 2*cs)
	}
	f2 := get(t, s2, testKey, Version{Size: size})
	defer f2.Release()
	if got, want := f2.Missing(0, size), []Range{{2 * cs, 2 * cs}}; !slices.Equal(got, want) {
		t.Fatalf("Missing after crash = %v, want %v", got, want)
	}
	checkRead(t, f2, 0, 2*cs)
	g2 := get(t, s2, k2, Version{Size: cs})
	defer g2.Release()
	if g2.Present(0, 1) {
		t.Fatal("an entry never saved is trusted after a crash")
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp file left: %v", err)
	}
	if l := logs.lines(); l != nil {
		t.Fatalf("recovery from a crash logged: %q", l)
	}
}

// TestUntrustedData: a record whose data file vanished or changed size is not trusted.
func TestUntrustedData(t *testing.T) {
	for _, c := range []struct {
		name    string
		damage  func(data string) error
		atOpen  bool // detected when loading (else at Get)
		logLine bool
	}{
		{"data file removed", os.Remove, true, true},
		{"data file truncated", func(p string) error { return os.Truncate(p, cs) }, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s, _ := openStore(t, dir, 0)
			f := get(t, s, testKey, Version{Size: 2 * cs})
			writeChunks(t, f, 0, 1)
			f.Release()
			s.Close()
			if err := c.damage(filepath.Join(dir, "data", hashKey(testKey).String())); err != nil {
				t.Fatal(err)
			}

			s, logs := openStore(t, dir, 0)
			wantFiles := 1
			if c.atOpen {
				wantFiles = 0
			}
			if _, n := s.Usage(); n != wantFiles {
				t.Fatalf("%d entries after reopen, want %d", n, wantFiles)
			}
			f = get(t, s, testKey, Version{Size: 2 * cs})
			defer f.Release()
			if f.Present(0, 1) || f.Present(cs, 1) {
				t.Fatal("chunks present without their data")
			}
			if b, _ := s.Usage(); b != 0 {
				t.Fatalf("usage %d, want 0", b)
			}
			if n := len(logs.lines()); n != 1 {
				t.Fatalf("%d log lines, want 1: %q", n, logs.lines())
			}
		})
	}
}

func TestCorruptRecords(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir, 0)
	keys := make([]Key, 6)
	for i := range keys {
		keys[i] = Key{Peer: "PEER", Share: "projects", Path: "f" + string(rune('a'+i))}
		f := get(t, s, keys[i], Version{Size: 3 * cs})
		writeChunks(t, f, 0, 1, 2)
		f.Release()
	}
	s.Close()

	rec := func(i int) string { return filepath.Join(dir, "data", hashKey(keys[i]).String()+".map") }
	good, err := os.ReadFile(rec(0))
	if err != nil {
		t.Fatal(err)
	}
	flip := slices.Clone(good)
	flip[len(flip)-8] ^= 0x40 // a bitmap bit
	badMagic := slices.Clone(good)
	badMagic[0] = 'X'
	for i, b := range [][]byte{
		nil,                // empty (a rename that reached the disk before its data)
		good[:len(good)/2], // torn
		flip,               // a flipped bit, caught by the CRC
		badMagic,           // not a record
		good,               // keys[0]'s record under keys[5]'s name
	} {
		if err := os.WriteFile(rec(i+1), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	s, logs := openStore(t, dir, 0)
	if b, n := s.Usage(); n != 1 || b != 3*cs {
		t.Fatalf("after corruption: %d bytes, %d files; want %d, 1", b, n, 3*cs)
	}
	lines := logs.lines()
	if len(lines) != 1 || !strings.Contains(lines[0], "count=5") {
		t.Fatalf("want one log line for 5 records, got %q", lines)
	}
	// The discarded entries' files are gone; the good one works.
	if names := dataFiles(t, dir); len(names) != 2 {
		t.Fatalf("data dir holds %v", names)
	}
	f := get(t, s, keys[0], Version{Size: 3 * cs})
	defer f.Release()
	checkRead(t, f, 0, 3*cs)
	g := get(t, s, keys[3], Version{Size: 3 * cs})
	defer g.Release()
	if g.Present(0, 1) {
		t.Fatal("a discarded entry is present")
	}
}

func TestInvalidate(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir, 0)
	v := Version{Size: 2 * cs}
	f := get(t, s, testKey, v)
	writeChunks(t, f, 0)
	s.Invalidate(testKey)

	// The open File keeps working on the dropped data, and is never saved.
	if !f.Stale() {
		t.Fatal("not stale after Invalidate")
	}
	checkRead(t, f, 0, cs)
	writeChunks(t, f, 1)
	if !f.Complete() {
		t.Fatal("stale file does not take writes")
	}
	if b, n := s.Usage(); b != 0 || n != 0 {
		t.Fatalf("usage after Invalidate = %d bytes, %d files", b, n)
	}
	if names := dataFiles(t, dir); len(names) != 0 {
		t.Fatalf("files left after Invalidate: %v", names)
	}
	if err := s.flush(flushAll); err != nil {
		t.Fatal(err)
	}
	if names := dataFiles(t, dir); len(names) != 0 {
		t.Fatalf("a stale entry was saved: %v", names)
	}

	// A new Get starts afresh while the stale File is still open.
	g := get(t, s, testKey, v)
	if g.Stale() || g.Present(0, 1) {
		t.Fatal("new Get sees invalidated data")
	}
	writeChunks(t, g, 1)
	checkRead(t, f, 0, 2*cs) // the stale file still reads its own bytes
	f.Release()
	g.Release()
	s.Close()

	s, _ = openStore(t, dir, 0)
	if b, n := s.Usage(); b != cs || n != 1 {
		t.Fatalf("after reopen: %d bytes, %d files", b, n)
	}
	h := get(t, s, testKey, v)
	defer h.Release()
	if got, want := h.Missing(0, 2*cs), []Range{{0, cs}}; !slices.Equal(got, want) {
		t.Fatalf("Missing = %v, want %v", got, want)
	}
}

func TestVersionChange(t *testing.T) {
	s, _ := openStore(t, t.TempDir(), 0)
	v1 := Version{Size: cs, MtimeNs: 1, Ino: 7}
	f1 := get(t, s, testKey, v1)
	writeChunks(t, f1, 0)

	for _, v2 := range []Version{{Size: cs, MtimeNs: 2, Ino: 7}, {Size: cs, MtimeNs: 2, Ino: 8}, {Size: 2 * cs, MtimeNs: 2, Ino: 8}} {
		f2 := get(t, s, testKey, v2)
		if !f1.Stale() {
			t.Fatal("the old version's File is not stale")
		}
		if f2.Version() != v2 || f2.Present(0, 1) {
			t.Fatalf("%+v: sees the old data", v2)
		}
		if fi, _ := f2.OSFile().Stat(); fi.Size() != v2.Size {
			t.Fatalf("data file size %d, want %d", fi.Size(), v2.Size)
		}
		writeChunks(t, f2, 0)
		f1.Release()
		f1 = f2
	}
	checkRead(t, f1, 0, cs)
	f1.Release()
	if b, n := s.Usage(); b != cs || n != 1 {
		t.Fatalf("usage = %d bytes, %d files", b, n)
	}
}

func TestInvalidatePrefix(t *testing.T) {
	s, _ := openStore(t, t.TempDir(), 0)
	keys := []Key{
		{"A", "s", "dir"},
		{"A", "s", "dir/f"},
		{"A", "s", "dir/sub/g"},
		{"A", "s", "dir2/f"},
		{"A", "s", "dirx"},
		{"A", "s", "top"},
		{"A", "t", "dir/f"},
		{"B", "s", "dir/f"},
	}
	for _, k := range keys {
		get(t, s, k, Version{Size: 1}).Release()
	}
	remaining := func() []string {
		s.mu.Lock()
		defer s.mu.Unlock()
		var out []string
		for _, e := range s.mu.entries {
			out = append(out, e.key.Peer+":"+e.key.Share+":"+e.key.Path)
		}
		slices.Sort(out)
		return out
	}

	s.InvalidatePrefix("A", "s", "dir")
	want := []string{"A:s:dir2/f", "A:s:dirx", "A:s:top", "A:t:dir/f", "B:s:dir/f"}
	if got := remaining(); !slices.Equal(got, want) {
		t.Fatalf("after dropping A:s:dir: %v, want %v", got, want)
	}
	s.InvalidatePrefix("A", "s", "")
	want = []string{"A:t:dir/f", "B:s:dir/f"}
	if got := remaining(); !slices.Equal(got, want) {
		t.Fatalf("after dropping the share root: %v, want %v", got, want)
	}
}

// TestEviction fills a small cache in a known LRU order and checks what goes: least recently
// used first, down to the low-water mark, never a referenced entry.
func TestEviction(t *testing.T) {
	const limit = 4 * cs // low water 3.8 chunks
	s, _ := openStore(t, t.TempDir(), limit)
	key := func(name string) Key { return Key{Peer: "P", Share: "s", Path: name} }
	v := Version{Size: cs}
	setUse := func(name string, use int64) {
		s.mu.Lock()
		s.mu.entries[hashKey(key(name))].lastUse.Store(use)
		s.mu.Unlock()
	}
	held := get(t, s, key("a"), v) // the oldest, but referenced
	writeChunks(t, held, 0)
	setUse("a", 1)
	for i, name := range []string{"b", "c", "d"} {
		f := get(t, s, key(name), v)
		writeChunks(t, f, 0)
		f.Release()
		setUse(name, int64(i+2))
	}
	if n := s.evict(); n != 0 {
		t.Fatalf("evicted %d entries at the limit", n)
	}

	// One more chunk: 5 over a limit of 4; b and c go, a stays though older.
	e := get(t, s, key("e"), v)
	setUse("e", 10)
	writeChunks(t, e, 0)
	e.Release()
	s.evict() // the background loop may have done it already; the order is the same
	waitFor(t, "eviction", func() bool { b, _ := s.Usage(); return b <= limit-limit/lowWaterDiv })
	s.mu.Lock()
	var left []string
	for _, en := range s.mu.entries {
		left = append(left, en.key.Path)
	}
	s.mu.Unlock()
	slices.Sort(left)
	if want := []string{"a", "d", "e"}; !slices.Equal(left, want) {
		t.Fatalf("left after eviction: %v, want %v", left, want)
	}
	checkRead(t, held, 0, cs)

	// Everything referenced and over the limit: nothing can go until a Release.
	f := get(t, s, key("d"), v)
	g := get(t, s, key("e"), v)
	h := get(t, s, key("f"), v)
	writeChunks(t, h, 0)
	i := get(t, s, key("g"), v)
	writeChunks(t, i, 0)
	if n := s.evict(); n != 0 {
		t.Fatalf("evicted %d referenced entries", n)
	}
	if b, _ := s.Usage(); b != 5*cs {
		t.Fatalf("usage %d, want %d", b, 5*cs)
	}
	held.Release() // the only unreferenced entry: the background loop takes it
	waitFor(t, "eviction after Release", func() bool { _, n := s.Usage(); return n == 4 })
	if held.Stale() != true {
		t.Fatal("evicted entry's File is not stale")
	}
	for _, x := range []*File{f, g, h, i} {
		if x.Stale() {
			t.Fatal("a referenced entry was evicted")
		}
		x.Release()
	}
}

func TestGetAfterClose(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir, 0)
	f := get(t, s, testKey, Version{Size: cs})
	writeChunks(t, f, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(testKey, Version{Size: cs}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("ReadAt after Close: %v", err)
	}
	f.Release()
	f.Release() // twice: harmless
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// What the open File had was saved.
	s, _ = openStore(t, dir, 0)
	g := get(t, s, testKey, Version{Size: cs})
	defer g.Release()
	checkRead(t, g, 0, cs)
}

func TestLocked(t *testing.T) {
	dir := t.TempDir()
	openStore(t, dir, 0)
	if _, err := Open(Options{Dir: dir}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
}

func TestNamesHidePaths(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir, 0)
	k := Key{Peer: "PEERID", Share: "secret-share", Path: "taxes/2024.pdf"}
	f := get(t, s, k, Version{Size: cs})
	writeChunks(t, f, 0)
	f.Release()
	s.Close()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		for _, w := range []string{"PEERID", "secret", "taxes", "2024"} {
			if strings.Contains(p, w) {
				t.Errorf("%s names %q", p, w)
			}
		}
		return nil
	})
	// Separators inside names cannot make two keys collide.
	if hashKey(Key{"a|b", "c", "d"}) == hashKey(Key{"a", "b|c", "d"}) ||
		hashKey(Key{"a", "b", "c/d"}) == hashKey(Key{"a", "b/c", "d"}) {
		t.Fatal("key hash is ambiguous")
	}
}

// TestSaveFailure: a save that fails leaves the entry dirty, its data file open, and is
// retried; nothing is lost in memory meanwhile.
func TestSaveFailure(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir, 0)
	s.flushMu.Lock() // keep the background loop out while the directory is away
	f := get(t, s, testKey, Version{Size: cs})
	writeChunks(t, f, 0)
	// A directory where the record's temp file goes makes the save fail (as a full disk
	// would; permissions would not stop root). It is not empty, so the failed save's
	// clean-up cannot remove it: the background loop may try a save before this test does.
	block := filepath.Join(dir, "data", hashKey(testKey).String()+".tmp")
	if err := os.Mkdir(block, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(block, "keep"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f.Release()
	s.flushMu.Unlock()
	if err := s.flush(flushDue); err == nil {
		t.Fatal("flush into a missing directory succeeded")
	}
	s.flushMu.Lock() // not in the middle of a background retry
	s.mu.Lock()
	e := s.mu.entries[hashKey(testKey)]
	open, dirty := e.file != nil, e.dirty.Load()
	s.mu.Unlock()
	s.flushMu.Unlock()
	if !open || !dirty {
		t.Fatalf("after a failed save: file open %v, dirty %v", open, dirty)
	}
	if err := os.RemoveAll(block); err != nil {
		t.Fatal(err)
	}
	if err := s.flush(flushDue); err != nil {
		t.Fatal(err)
	}
	if e.dirty.Load() {
		t.Fatal("still dirty after a successful save")
	}
	s.Close()
	s, _ = openStore(t, dir, 0)
	g := get(t, s, testKey, Version{Size: cs})
	defer g.Release()
	checkRead(t, g, 0, cs)
}

// TestStoreSurvivesRemovedDir: a cache directory emptied or removed under a running store
// (to free space) is made again at the next new entry; files already open keep working.
func TestStoreSurvivesRemovedDir(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	open := get(t, s, testKey, Version{Size: ChunkSize})
	defer open.Release()
	if _, err := open.WriteAt(make([]byte, ChunkSize), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	other := Key{Peer: testKey.Peer, Share: testKey.Share, Path: "other"}
	f, err := s.Get(other, Version{Size: 3 * ChunkSize})
	if err != nil {
		t.Fatalf("a new entry after the directory was removed: %v", err)
	}
	defer f.Release()
	if _, err := f.WriteAt(make([]byte, ChunkSize), 0); err != nil || !f.Present(0, ChunkSize) {
		t.Fatalf("writing the new entry: %v", err)
	}
	buf := make([]byte, ChunkSize)
	if _, err := open.ReadAt(buf, 0); err != nil {
		t.Fatalf("an entry open before the removal: %v", err)
	}
	// Saving gives up on the entry whose files are gone, instead of failing forever.
	if err := s.flush(flushAll); err != nil {
		t.Errorf("saving after the removal: %v", err)
	}
}
