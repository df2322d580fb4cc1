//go:build linux

package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
)

// journaling mounts the share with --writes journal.
func journaling(p *api.MountParams) { p.Writes = api.WritesJournal }

// journalOf returns the mount's journal state from "mounts".
func journalOf(t *testing.T, m *mounted) api.JournalInfo {
	t.Helper()
	res, err := m.b.N.Mounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, mi := range res.Mounts {
		if mi.Dir == m.mnt {
			if mi.Writes != api.WritesJournal || mi.Journal == nil {
				t.Fatalf("mounts shows writes %q, journal %v: want a journaling mount", mi.Writes, mi.Journal)
			}
			return *mi.Journal
		}
	}
	t.Fatalf("%s not in mounts", m.mnt)
	return api.JournalInfo{}
}

// syncMount fsyncs the mount's top folder: everything the mount changed before is durable on
// the owner when it returns.
func syncMount(t *testing.T, dir string) error {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return f.Sync()
}

// TestJournalWritesWithoutWaiting: with --writes journal, creates, writes, renames, links,
// symlinks, chmods, truncates, unlinks and rmdirs through the mount wait for no round trip,
// read back at once as written, and are all on the owner, in order, once an fsync returns.
func TestJournalWritesWithoutWaiting(t *testing.T) {
	m := mountShare(t, journaling)
	src := filepath.Join(m.mnt, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	trips, journaled := counter(t, m, "round_trips"), counter(t, m, "journaled_changes")
	const n = 100
	want := map[string][]byte{}
	for i := range n {
		name := fmt.Sprintf("f%03d", i)
		data := bytes.Repeat([]byte(name), 10*(i+1))
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		want[name] = data
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 200<<10/16) // past the inline size
	if err := os.WriteFile(filepath.Join(src, "big"), big, 0o600); err != nil {
		t.Fatal(err)
	}
	want["big"] = big
	do := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	do("mkdir", os.Mkdir(filepath.Join(src, "sub"), 0o700))
	do("rename", os.Rename(filepath.Join(src, "f000"), filepath.Join(src, "sub", "g000")))
	do("unlink", os.Remove(filepath.Join(src, "f001")))
	do("chmod", os.Chmod(filepath.Join(src, "f002"), 0o600))
	do("truncate", os.Truncate(filepath.Join(src, "f003"), 2))
	do("link", os.Link(filepath.Join(src, "f004"), filepath.Join(src, "f004.link")))
	do("symlink", os.Symlink("f005", filepath.Join(src, "f005.sym")))
	do("mkdir", os.Mkdir(filepath.Join(src, "gone"), 0o755))
	do("rmdir", os.Remove(filepath.Join(src, "gone")))
	do("rename over", os.Rename(filepath.Join(src, "f006"), filepath.Join(src, "f007")))
	want["sub/g000"], want["f003"], want["f004.link"], want["f007"] = want["f000"], want["f003"][:2], want["f004"], want["f006"]
	delete(want, "f000")
	delete(want, "f001")
	delete(want, "f006")
	// None is needed; an owner's event arriving between two of these calls may cost the
	// kernel a lookup, which is not what this counts.
	if got := counter(t, m, "round_trips") - trips; got > 2 {
		t.Errorf("%d files written and changed made %d round trips, want none", n, got)
	} else {
		t.Logf("%d files written and changed: %d round trips", n, got)
	}
	if got := counter(t, m, "journaled_changes") - journaled; got < n {
		t.Errorf("journaled_changes counted %d, want at least %d", got, n)
	}
	// Read back through the mount at once, whether or not the owner has them yet.
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(src, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("reading %s back through the mount: %d bytes, %v; want %d bytes", name, len(got), err, len(data))
		}
	}
	if _, err := os.Lstat(filepath.Join(src, "f001")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unlinked f001: %v, want it gone", err)
	}
	if fi, err := os.Stat(filepath.Join(src, "f002")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("chmodded f002: %v, %v; want mode 0600", fi, err)
	}

	if err := syncMount(t, m.mnt); err != nil {
		t.Fatalf("fsync of the mount: %v", err)
	}
	owned := filepath.Join(m.share, "src")
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(owned, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("owner's %s after fsync: %d bytes, %v; want %d bytes", name, len(got), err, len(data))
		}
	}
	for _, name := range []string{"f000", "f001", "f006", "gone"} {
		if _, err := os.Lstat(filepath.Join(owned, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("owner's %s: %v, want it gone", name, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(owned, "f002")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("owner's f002: %v, %v; want mode 0600", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(owned, "sub")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("owner's sub: %v, %v; want a folder of mode 0700", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(owned, "f005.sym")); err != nil || target != "f005" {
		t.Errorf("owner's f005.sym: %q, %v; want a link to f005", target, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(owned, "f004"), &st); err != nil || st.Nlink != 2 {
		t.Errorf("owner's f004: %d links, %v; want 2", st.Nlink, err)
	}
	if j := journalOf(t, m); j.Waiting != 0 || !j.Online || j.Refused != 0 {
		t.Errorf("journal after fsync: %+v; want online, nothing waiting, nothing refused", j)
	}
	// One inode number throughout: the mount's, before and after the owner numbered the file.
	var before, after syscall.Stat_t
	if err := syscall.Stat(filepath.Join(src, "f010"), &before); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "f010" {
			info, _ := e.Info()
			after = *info.Sys().(*syscall.Stat_t)
		}
	}
	if before.Ino != after.Ino {
		t.Errorf("f010's inode number %d by stat, %d by listing: want one", before.Ino, after.Ino)
	}
}

// TestJournalOffline: with the owner's daemon stopped, a journaling mount keeps working:
// listed folders and files held whole read, new files and folders are written, a read of
// contents the mount does not hold fails within seconds, and status says offline with the
// changes waiting. When the owner is back, the journal drains by itself.
func TestJournalOffline(t *testing.T) {
	m := mountShare(t, journaling, func(p *api.MountParams) { p.WaitSeconds = 5 })
	big := bytes.Repeat([]byte("x"), 300<<10)
	if err := os.WriteFile(filepath.Join(m.share, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(m.mnt, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "a"), []byte("written online"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syncMount(t, m.mnt); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadDir(m.mnt); err != nil {
		t.Fatal(err)
	}

	m.a.Stop()
	for i := range 5 {
		name := filepath.Join(work, fmt.Sprint("offline", i))
		if err := os.WriteFile(name, []byte(fmt.Sprint("written offline ", i)), 0o644); err != nil {
			t.Fatalf("writing %s offline: %v", name, err)
		}
	}
	if err := os.Mkdir(filepath.Join(work, "dir"), 0o755); err != nil {
		t.Fatalf("mkdir offline: %v", err)
	}
	if err := os.Rename(filepath.Join(work, "offline0"), filepath.Join(work, "dir", "moved")); err != nil {
		t.Fatalf("rename offline: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(work, "a")); err != nil || string(got) != "written online" {
		t.Errorf("reading a file held whole offline: %q, %v", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(work, "offline1")); err != nil || string(got) != "written offline 1" {
		t.Errorf("reading back a file written offline: %q, %v", got, err)
	}
	start := time.Now()
	_, err := os.ReadFile(filepath.Join(m.mnt, "big"))
	if took := time.Since(start); err == nil || took > 5*time.Second {
		t.Errorf("reading contents the mount never held, offline: %v after %v; want a failure within seconds", err, took)
	}
	deadline := time.Now().Add(10 * time.Second)
	for j := journalOf(t, m); j.Online || j.Waiting < 7; j = journalOf(t, m) {
		if time.Now().After(deadline) {
			t.Fatalf("journal offline: %+v; want offline with at least 7 changes waiting", j)
		}
		time.Sleep(100 * time.Millisecond)
	}

	m.a.Restart()
	deadline = time.Now().Add(30 * time.Second)
	for j := journalOf(t, m); j.Waiting > 0 || !j.Online; j = journalOf(t, m) {
		if time.Now().After(deadline) {
			t.Fatalf("journal after the owner came back: %+v; want it drained", j)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := syncMount(t, m.mnt); err != nil {
		t.Fatalf("fsync after the owner came back: %v", err)
	}
	owned := filepath.Join(m.share, "work")
	for i := 1; i < 5; i++ {
		ownerHas(t, filepath.Join(owned, fmt.Sprint("offline", i)), []byte(fmt.Sprint("written offline ", i)))
	}
	ownerHas(t, filepath.Join(owned, "dir", "moved"), []byte("written offline 0"))
	if got, err := os.ReadFile(filepath.Join(m.mnt, "big")); err != nil || !bytes.Equal(got, big) {
		t.Errorf("reading big once the owner is back: %d bytes, %v", len(got), err)
	}
}

// TestJournalRefusedByOwner: changes the owner refuses (its share made read-only after they
// were made) fail the next fsync with the owner's error and show in status; they stay in the
// journal, and reach the owner once it takes them again.
func TestJournalRefusedByOwner(t *testing.T) {
	m := mountShare(t, journaling)
	dir := filepath.Join(m.mnt, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syncMount(t, m.mnt); err != nil {
		t.Fatal(err)
	}
	setReadOnly := func(ro bool) {
		m.a.Update(func(f *config.File) error {
			for i := range f.Shares {
				f.Shares[i].ReadOnly = ro
			}
			return nil
		})
	}
	setReadOnly(true)
	// The owner's reload of its shares makes the mount forget what it knows (a rescan), and
	// a create in a folder it does not list goes to the owner at once, which refuses it
	// (EROFS at open). Once the folder is listed again, the create is decided here.
	name := filepath.Join(dir, "kept")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.ReadDir(dir); err != nil {
			t.Fatal(err)
		}
		err := os.WriteFile(name, []byte("not lost"), 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EROFS) || time.Now().After(deadline) {
			t.Fatalf("a write the owner will refuse completes here: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = f.Sync()
	f.Close()
	if !errors.Is(err, syscall.EROFS) || time.Since(start) > 20*time.Second {
		t.Errorf("fsync of a change the owner refuses: %v after %v; want EROFS within seconds", err, time.Since(start))
	}
	j := journalOf(t, m)
	if j.Waiting == 0 || !strings.Contains(j.LastError, "read-only") {
		t.Errorf("journal while the owner refuses: %+v; want the change waiting and the owner's reason", j)
	}
	// Read from what the mount holds. The kernel sends the RELEASE of the descriptor closed
	// above after close returned; until it lands the file counts as open for writing, and a
	// read of it asks the owner, which cannot answer with the journal's changes now.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, err := os.ReadFile(name)
		if err == nil && string(got) == "not lost" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the refused file through the mount: %q, %v", got, err)
		}
	}

	setReadOnly(false)
	deadline = time.Now().Add(30 * time.Second)
	for journalOf(t, m).Waiting > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the journal never drained once the share was writable again: %+v", journalOf(t, m))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := syncMount(t, m.mnt); err != nil {
		t.Fatalf("fsync once the share is writable again: %v", err)
	}
	ownerHas(t, filepath.Join(m.share, "d", "kept"), []byte("not lost"))
}
