package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// journalWaiting returns the changes a journaling mount of home at mnt has waiting, from
// "peerfs mounts --json".
func journalWaiting(t *testing.T, home, mnt string) (waiting uint64, online bool) {
	t.Helper()
	var doc struct {
		Mounts []struct {
			Dir     string
			Writes  string
			Journal *struct {
				Online  bool
				Waiting uint64
			}
		}
	}
	if err := json.Unmarshal([]byte(must(t, home, "mounts", "--json")), &doc); err != nil {
		t.Fatal(err)
	}
	for _, m := range doc.Mounts {
		if m.Dir == mnt {
			if m.Writes != "journal" || m.Journal == nil {
				t.Fatalf("mounts --json: writes %q, journal %v; want a journaling mount", m.Writes, m.Journal)
			}
			return m.Journal.Waiting, m.Journal.Online
		}
	}
	t.Fatalf("mounts --json does not list %s", mnt)
	return 0, false
}

// TestJournalSurvivesKills: a journaling mount's changes made while the owner is away survive
// kill -9 of the mount's daemon (they are sent once it mounts the share again) and kill -9 of
// the owner's daemon while they drain; the owner ends with every file, as written.
func TestJournalSurvivesKills(t *testing.T) {
	needFUSE(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "alpha"), filepath.Join(dir, "beta")
	must(t, a, "init", "--name", "alpha")
	must(t, b, "init", "--name", "beta")
	owner := startDaemonProcess(t, a)
	must(t, a, "peer", "add", strings.TrimSpace(must(t, b, "id")), "--name", "beta")
	must(t, b, "peer", "add", strings.TrimSpace(must(t, a, "id")), "--name", "alpha", "--addr", owner.addr)
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	must(t, a, "share", "add", "docs", src, "--peer", "beta")
	mnt := t.TempDir()
	t.Cleanup(func() { exec.Command("fusermount3", "-u", "-z", mnt).Run() }) // only after a failure
	mounter := startDaemonProcess(t, b)
	must(t, b, "mount", "--writes", "journal", "alpha:docs", mnt)

	work := filepath.Join(mnt, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if d, err := os.Open(mnt); err != nil {
		t.Fatal(err)
	} else if err := d.Sync(); err != nil {
		t.Fatalf("fsync of the mount: %v", err)
	} else {
		d.Close()
	}

	// The owner goes away; the mount keeps taking changes into its journal.
	if err := owner.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	const n = 50
	content := func(i int) string { return strings.Repeat(fmt.Sprintf("file %d of the journal\n", i), i+1) }
	for i := range n {
		if err := os.WriteFile(filepath.Join(work, fmt.Sprint("f", i)), []byte(content(i)), 0o644); err != nil {
			t.Fatalf("writing f%d with the owner away: %v", i, err)
		}
	}
	if err := os.Rename(filepath.Join(work, "f0"), filepath.Join(work, "renamed")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(work, "f1")); err != nil {
		t.Fatal(err)
	}
	if waiting, online := journalWaiting(t, b, mnt); waiting < n || online {
		t.Logf("journal with the owner away: %d waiting, online %v", waiting, online)
	}

	// kill -9 of the mount's daemon with all of it waiting.
	mounter.stop(syscall.SIGKILL)
	owner = startDaemonProcess(t, a)
	must(t, b, "peer", "set", "alpha", "--addr", owner.addr)
	mounter = startDaemonProcess(t, b)

	// kill -9 of the owner as soon as the remounted journal starts to drain, then back.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(src, "work", "f2")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			mounter.cmd.Process.Signal(syscall.SIGQUIT)
			time.Sleep(time.Second)
			log, _ := os.ReadFile(b + ".log")
			t.Fatalf("nothing of the journal reached the owner 20 s after the restart:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	owner.stop(syscall.SIGKILL)
	owner = startDaemonProcess(t, a)
	must(t, b, "peer", "set", "alpha", "--addr", owner.addr)

	deadline = time.Now().Add(60 * time.Second)
	for {
		waiting, online := journalWaiting(t, b, mnt)
		if waiting == 0 && online {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(b + ".log")
			t.Fatalf("journal not drained 60 s after the owner came back: %d waiting, online %v\n%s", waiting, online, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	owned := filepath.Join(src, "work")
	for i := 2; i < n; i++ {
		got, err := os.ReadFile(filepath.Join(owned, fmt.Sprint("f", i)))
		if err != nil || string(got) != content(i) {
			t.Fatalf("owner's f%d: %d bytes, %v; want %d bytes", i, len(got), err, len(content(i)))
		}
	}
	if got, err := os.ReadFile(filepath.Join(owned, "renamed")); err != nil || string(got) != content(0) {
		t.Errorf("owner's renamed: %q, %v", got, err)
	}
	for _, gone := range []string{"f0", "f1"} {
		if _, err := os.Lstat(filepath.Join(owned, gone)); err == nil {
			t.Errorf("owner still has %s", gone)
		}
	}
	must(t, b, "unmount", mnt)
}
