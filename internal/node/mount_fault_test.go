//go:build linux

package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/peertest"
)

func counter(t *testing.T, m *mounted, name string) int64 {
	t.Helper()
	res, err := m.b.N.Stats(context.Background(), api.UnmountParams{Dir: m.mnt})
	if err != nil {
		t.Fatal(err)
	}
	return res.Counters[name]
}

func opCalls(t *testing.T, m *mounted, name string) int64 {
	t.Helper()
	res, err := m.b.N.Stats(context.Background(), api.UnmountParams{Dir: m.mnt})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Ops {
		if o.Name == name {
			return o.Calls
		}
	}
	return 0
}

// TestMountPassthrough proves that a fully cached file that the kernel's pages do not hold is
// read by the kernel from the cache file: a second full read sends no READ to the daemon.
func TestMountPassthrough(t *testing.T) {
	m := mountShare(t)
	peertest.WriteRandomFile(t, filepath.Join(m.share, "f.bin"), 16<<20, 21)
	want, _ := os.ReadFile(filepath.Join(m.share, "f.bin"))
	if got := cacheBypassingPages(t, filepath.Join(m.mnt, "f.bin")); !bytes.Equal(got, want) {
		t.Fatal("first read differs")
	}
	readsBefore := opCalls(t, m, "read")
	got, err := os.ReadFile(filepath.Join(m.mnt, "f.bin"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("second read: %v", err)
	}
	if counter(t, m, "passthrough_opens") == 0 {
		t.Skip("the kernel refused FUSE passthrough here (needs CAP_SYS_ADMIN and a kernel with FUSE passthrough)")
	}
	if after := opCalls(t, m, "read"); after != readsBefore {
		t.Fatalf("a passthrough read still sent %d READs to the daemon", after-readsBefore)
	}
}

// TestMountOwnerKilled: an application writing or reading when the owner's daemon dies gets
// an error within the wait bound instead of hanging, and the mount works again once the owner
// is back.
func TestMountOwnerKilled(t *testing.T) {
	m := mountShare(t, func(p *api.MountParams) { p.WaitSeconds = 2 })
	peertest.WriteRandomFile(t, filepath.Join(m.share, "big.bin"), 256<<20, 22)

	// Write: the owner dies after the first megabytes.
	f, err := os.Create(filepath.Join(m.mnt, "out.bin"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte{9}, 1<<20)
	start := time.Now()
	var werr error
	for i := 0; i < 512 && werr == nil; i++ {
		if i == 40 {
			m.a.Stop()
		}
		_, werr = f.Write(chunk)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		t.Fatal("writing to a dead owner reported no error")
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the write took %v to fail", d)
	}

	// Read of uncached data while the owner is down: an error, no hang.
	start = time.Now()
	_, rerr := os.ReadFile(filepath.Join(m.mnt, "big.bin"))
	if rerr == nil {
		t.Fatal("reading uncached data from a dead owner succeeded")
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the read took %v to fail", d)
	}

	// The owner comes back: the mount works again.
	m.a.Restart()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := os.ReadFile(filepath.Join(m.mnt, "big.bin"))
		if err == nil {
			want, _ := os.ReadFile(filepath.Join(m.share, "big.bin"))
			if !bytes.Equal(got, want) {
				t.Fatal("content differs after the owner came back")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mount still failing 30 s after the owner came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(m.mnt, "after.txt"), []byte("ok"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(m.share, "after.txt")); string(b) != "ok" {
		t.Fatalf("owner has %q", b)
	}
}

// TestMountConcurrentBothSides: the mount and the owner write disjoint records of one file at
// once while readers read it through the mount; after both close, both sides see every record.
func TestMountConcurrentBothSides(t *testing.T) {
	m := mountShare(t)
	const rec, n = 64 << 10, 64
	if err := os.WriteFile(filepath.Join(m.share, "shared.dat"), make([]byte, rec*n), 0o644); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, rec*n)
	for i := 0; i < n; i++ {
		copy(want[i*rec:(i+1)*rec], bytes.Repeat([]byte{byte(i + 1)}, rec))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	write := func(path string, odd int) {
		defer wg.Done()
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			errs <- err
			return
		}
		for i := odd; i < n; i += 2 {
			if _, err := f.WriteAt(want[i*rec:(i+1)*rec], int64(i*rec)); err != nil {
				errs <- err
			}
		}
		if err := f.Close(); err != nil {
			errs <- err
		}
	}
	stop := make(chan struct{})
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := os.ReadFile(filepath.Join(m.mnt, "shared.dat")); err != nil {
					errs <- fmt.Errorf("concurrent reader: %w", err)
					return
				}
			}
		}()
	}
	var writers sync.WaitGroup
	writers.Add(2)
	wg.Add(2)
	go func() { defer writers.Done(); write(filepath.Join(m.mnt, "shared.dat"), 0) }()
	go func() { defer writers.Done(); write(filepath.Join(m.share, "shared.dat"), 1) }()
	writers.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got, _ := os.ReadFile(filepath.Join(m.share, "shared.dat")); !bytes.Equal(got, want) {
		t.Fatal("the owner's file lacks records written from one side")
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		got, err := os.ReadFile(filepath.Join(m.mnt, "shared.dat"))
		if err == nil && bytes.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the mount does not show both sides' records")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestMountSqliteAndStressNG(t *testing.T) {
	m := mountShare(t)
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Log("sqlite3 not installed (make deps): skipping the database part")
	} else {
		db := filepath.Join(m.mnt, "test.db")
		var sql strings.Builder
		sql.WriteString("PRAGMA journal_mode=WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); BEGIN;")
		for i := 0; i < 2000; i++ {
			fmt.Fprintf(&sql, "INSERT INTO t(v) VALUES('row %d');", i)
		}
		sql.WriteString("COMMIT; PRAGMA integrity_check; SELECT count(*) FROM t;")
		out := run(t, m.mnt, "sqlite3", db, sql.String())
		if !strings.Contains(out, "ok") || !strings.Contains(out, "2000") {
			t.Fatalf("sqlite3 through the mount: %s", out)
		}
		run(t, m.mnt, "sqlite3", filepath.Join(m.share, "test.db"), "PRAGMA integrity_check;")
	}
	if _, err := exec.LookPath("stress-ng"); err != nil {
		t.Skip("stress-ng not installed (make deps)")
	}
	dir := filepath.Join(m.mnt, "stress")
	os.Mkdir(dir, 0o755)
	secs := "10"
	if testing.Short() {
		secs = "4"
	}
	cmd := exec.Command("stress-ng", "--temp-path", dir, "--hdd", "1", "--hdd-bytes", "8M",
		"--dir", "1", "--filename", "1", "--link", "1", "--rename", "1",
		"--timeout", secs, "--metrics-brief")
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("stress-ng failed (exit %d):\n%s", ee.ExitCode(), out)
		}
		t.Fatal(err)
	}
	if strings.Contains(string(out), "fail") && !strings.Contains(string(out), "0 failed") {
		t.Fatalf("stress-ng reported failures:\n%s\nleft on the owner: %s", out, ownerTree(filepath.Join(m.share, "stress")))
	}
	// Every stressor removes its own directory; a leftover means a file unlinked while open
	// stayed behind under its hidden name.
	if left, _ := os.ReadDir(filepath.Join(m.share, "stress")); len(left) != 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Fatalf("stress-ng's directories left behind on the owner: %v", names)
	}
}

// TestMountNameCreatedDuringOutage: names the mount found missing, before the owner went
// away and while it was away, show up through the mount soon after the owner is back, when
// they were created meanwhile: the rescan after the gap cannot reach the kernel's answers that
// a name does not exist, so those must not outlive it by much (an hour, once).
func TestMountNameCreatedDuringOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the kernel's negative timeout (10 s)")
	}
	m := mountShare(t, func(p *api.MountParams) { p.WaitSeconds = 1 })
	missing := func(name string) {
		t.Helper()
		if _, err := os.Stat(filepath.Join(m.mnt, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("stat %s through the mount: %v, want it missing", name, err)
		}
	}
	missing("before.txt") // while events flow
	m.a.Stop()
	time.Sleep(200 * time.Millisecond)
	os.Stat(filepath.Join(m.mnt, "during.txt")) // while the owner is away: missing or EIO
	for _, name := range []string{"before.txt", "during.txt"} {
		if err := os.WriteFile(filepath.Join(m.share, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m.a.Restart()
	start := time.Now()
	for _, name := range []string{"during.txt", "before.txt"} {
		for {
			b, err := os.ReadFile(filepath.Join(m.mnt, name))
			if err == nil && string(b) == name {
				break
			}
			if time.Since(start) > 20*time.Second {
				t.Fatalf("%s, created on the owner while it was away, still not seen through the mount 20 s after it came back: %v", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%s seen %v after the owner came back", name, time.Since(start).Round(time.Millisecond))
	}
}

// ownerTree lists what is under dir on the owner's disk, with each entry's type and size, for
// a failure message: what a stressor could not remove says which path kept it.
func ownerTree(dir string) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		info, _ := d.Info()
		size := int64(-1)
		if info != nil {
			size = info.Size()
		}
		fmt.Fprintf(&b, "\n  %s (%v, %d bytes)", strings.TrimPrefix(p, dir+"/"), d.Type(), size)
		return nil
	})
	if b.Len() == 0 {
		return "nothing"
	}
	return b.String()
}

// Offline, a mount keeps serving what it has and fails fast for the rest: with the owner's
// daemon gone (its every try refused), a listing the mount made and a file it read whole
// still answer, and a read of what it never fetched fails within 2 s (at once when the
// owner's machine refuses the connection) rather than after the mount's --wait (30 s here). The owner back, it reads again.
func TestMountOfflineServesCachedAndFailsFast(t *testing.T) {
	m := mountShare(t)
	if err := os.Mkdir(filepath.Join(m.share, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		peertest.WriteRandomFile(t, filepath.Join(m.share, "docs", fmt.Sprintf("n%d.txt", i)), 3000, uint64(i))
	}
	peertest.WriteRandomFile(t, filepath.Join(m.share, "cached.bin"), 8<<20, 31)
	peertest.WriteRandomFile(t, filepath.Join(m.share, "uncached.bin"), 8<<20, 32)
	want, err := os.ReadFile(filepath.Join(m.share, "cached.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(m.mnt, "cached.bin")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read through the mount: %v", err)
	}
	listed, err := os.ReadDir(filepath.Join(m.mnt, "docs"))
	if err != nil || len(listed) != 5 {
		t.Fatalf("listing: %d entries, %v", len(listed), err)
	}

	m.a.Stop()
	// Wait until the mount's daemon has tried the owner and failed.
	deadline := time.Now().Add(20 * time.Second)
	for !m.b.N.PeerOffline("alpha") {
		if time.Now().After(deadline) {
			t.Fatal("the owner's daemon is stopped, yet the mount's daemon never found it unreachable")
		}
		time.Sleep(50 * time.Millisecond)
	}

	start := time.Now()
	_, rerr := os.ReadFile(filepath.Join(m.mnt, "uncached.bin"))
	t.Logf("offline uncached read failed after %v: %v", time.Since(start), rerr)
	if took := time.Since(start); rerr == nil || took > 2*time.Second {
		t.Fatalf("offline read of uncached data: err %v after %v, want an error within 2 s", rerr, took)
	}
	if got, err := os.ReadDir(filepath.Join(m.mnt, "docs")); err != nil || len(got) != 5 {
		t.Fatalf("offline listing: %d entries, %v", len(got), err)
	}
	if got, err := os.ReadFile(filepath.Join(m.mnt, "cached.bin")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("offline read of a file read whole before: %v", err)
	}

	m.a.Restart()
	deadline = time.Now().Add(30 * time.Second)
	for {
		got, err := os.ReadFile(filepath.Join(m.mnt, "uncached.bin"))
		if err == nil {
			if w, _ := os.ReadFile(filepath.Join(m.share, "uncached.bin")); !bytes.Equal(got, w) {
				t.Fatal("content differs after the owner came back")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing 30 s after the owner came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
