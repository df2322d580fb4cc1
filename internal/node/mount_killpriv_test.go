//go:build linux

package node_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestMountDropsSetuidOnWrite: a write or truncate through the mount by a process without
// CAP_FSETID drops the file's setuid bit (and setgid with group execute) on the owner, as on
// a local filesystem, and one with CAP_FSETID keeps them. The mount negotiates
// HANDLE_KILLPRIV_V2, so the kernel leaves this to it.
func TestMountDropsSetuidOnWrite(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run writers with and without CAP_FSETID")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not found: it runs a writer without CAP_FSETID")
	}
	m := mountShare(t)
	modes := map[string]os.FileMode{
		"suid-write":   0o755 | os.ModeSetuid,
		"sgid-write":   0o775 | os.ModeSetgid,
		"suid-trunc":   0o755 | os.ModeSetuid,
		"suid-otrunc":  0o755 | os.ModeSetuid,
		"suid-as-root": 0o755 | os.ModeSetuid,
	}
	for name, mode := range modes {
		p := filepath.Join(m.share, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		// The owner's change reaches the mount as an event.
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			fi, err := os.Stat(filepath.Join(m.mnt, name))
			if err == nil && fi.Mode() == mode {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s through the mount after 2 s: %v, %v; want mode %v", name, fi, err, mode)
			}
		}
	}
	// unprivileged runs a command as root without CAP_FSETID: dropped from the bounding set,
	// it is missing from the capabilities the exec grants.
	unprivileged := func(args ...string) {
		t.Helper()
		cmd := exec.Command(setpriv, append([]string{"--bounding-set", "-fsetid"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
		}
	}
	unprivileged("sh", "-c", `printf 'echo hi\n' >> "$1"`, "sh", filepath.Join(m.mnt, "suid-write"))
	unprivileged("sh", "-c", `printf 'echo hi\n' >> "$1"`, "sh", filepath.Join(m.mnt, "sgid-write"))
	unprivileged("truncate", "-s", "3", filepath.Join(m.mnt, "suid-trunc"))
	// An O_TRUNC open without a write: the kernel truncates with a SETATTR of its own, marked
	// like truncate's.
	unprivileged("sh", "-c", `: > "$1"`, "sh", filepath.Join(m.mnt, "suid-otrunc"))
	f, err := os.OpenFile(filepath.Join(m.mnt, "suid-as-root"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("echo hi\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	want := map[string]os.FileMode{
		"suid-write":   0o755,
		"sgid-write":   0o775,
		"suid-trunc":   0o755,
		"suid-otrunc":  0o755,
		"suid-as-root": 0o755 | os.ModeSetuid,
	}
	for name, mode := range want {
		fi, err := os.Stat(filepath.Join(m.share, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("%s on the owner: mode %v, want %v", name, fi.Mode(), mode)
		}
		if fi, err := os.Stat(filepath.Join(m.mnt, name)); err != nil {
			t.Error(err)
		} else if fi.Mode() != mode {
			t.Errorf("%s through the mount: mode %v, want %v", name, fi.Mode(), mode)
		}
	}
}
