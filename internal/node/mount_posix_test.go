//go:build linux

package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/peertest"
)

// TestMountFsyncDir: fsync of a directory succeeds (git, sqlite and PostgreSQL fsync the
// directory after creating or renaming a file in it) and means its entries are on the owner,
// a file created in it and still open, with nothing written, included.
func TestMountFsyncDir(t *testing.T) {
	m := mountShare(t)
	dir, owned := createdDir(t, m, "d")
	f, err := os.Create(filepath.Join(dir, "new"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatalf("fsync of a directory in the mount: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(owned, "new")); err != nil {
		t.Fatalf("after the directory's fsync the owner lacks the file created in it: %v", err)
	}
	root, err := os.Open(m.mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := root.Sync(); err != nil {
		t.Fatalf("fsync of the mount's root: %v", err)
	}
}

// TestMountModeBits: chmod keeps every mode bit ext4 keeps for the caller: the sticky bit of a
// regular file, and of a directory made with it; a set-group-ID directory passes its group and
// the bit on to what is created in it.
func TestMountModeBits(t *testing.T) {
	m := mountShare(t)
	// A set-group-ID directory of group 4321 on the owner, made before the mount lists it.
	sg := filepath.Join(m.share, "sg")
	if err := os.Mkdir(sg, 0o775); err != nil {
		t.Fatal(err)
	}
	chownOK := os.Chown(sg, -1, 4321) == nil
	dir, owned := createdDir(t, m, "d")
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Chmod(file, 0o1621); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, filepath.Join(owned, "f")} {
		if got := modeOf(t, p); got != 0o1621 {
			t.Errorf("%s after chmod 01621: %#o", p, got)
		}
	}
	if err := syscall.Chmod(file, 0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, filepath.Join(owned, "f")} {
		if got := modeOf(t, p); got != 0 {
			t.Errorf("%s after chmod 0: %#o", p, got)
		}
	}
	if err := syscall.Mkdir(filepath.Join(dir, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	if got := modeOf(t, filepath.Join(owned, "tmp")); got&0o1000 == 0 {
		t.Errorf("mkdir 01777 made %#o on the owner, without the sticky bit", got)
	}
	if !chownOK {
		t.Skip("cannot chown on the owner: the rest needs root")
	}
	if err := syscall.Chmod(filepath.Join(m.mnt, "sg"), 0o2775); err != nil {
		t.Fatal(err)
	}
	if got := modeOf(t, sg); got != 0o2775 {
		t.Fatalf("chmod 02775 of a directory made %#o on the owner", got)
	}
	if err := os.WriteFile(filepath.Join(m.mnt, "sg", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(m.mnt, "sg", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"f", "sub"} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(sg, name), &st); err != nil {
			t.Fatal(err)
		}
		if st.Gid != 4321 {
			t.Errorf("%s created in a set-group-ID directory has group %d on the owner, want 4321", name, st.Gid)
		}
	}
	if got := modeOf(t, filepath.Join(m.mnt, "sg", "sub")); got&0o2000 == 0 {
		t.Errorf("a directory made in a set-group-ID one shows %#o through the mount, without the bit", got)
	}
}

// modeOf returns the permission bits of path (not followed), set-id and sticky included.
func modeOf(t *testing.T, path string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode & 0o7777
}

// privileged makes the share of m privileged (config.Share.Privileged) or not.
func privileged(t *testing.T, m *mounted, on bool) {
	t.Helper()
	m.a.Update(func(f *config.File) error {
		f.Shares[0].Privileged = on
		return nil
	})
}

// idsOf returns the owner and group of path, not followed.
func idsOf(t *testing.T, path string) (uint32, uint32) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Uid, st.Gid
}

// TestMountChown: chown to the current IDs succeeds; to others it is EPERM unless the share
// is privileged, and then applied on the owner as the owner's system allows.
func TestMountChown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the owner's daemon must be able to chown")
	}
	m := mountShare(t)
	dir, owned := createdDir(t, m, "d")
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(f, 0, 0); err != nil {
		t.Fatalf("chown to the current IDs: %v", err)
	}
	if err := os.Lchown(f, -1, -1); err != nil {
		t.Fatalf("chown -1 -1: %v", err)
	}
	if err := os.Chown(f, 1234, 4321); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("chown to other IDs in a share that is not privileged: %v, want EPERM", err)
	}
	privileged(t, m, true)
	if err := os.Chown(f, 1234, 4321); err != nil {
		t.Fatalf("chown in a privileged share: %v", err)
	}
	for _, p := range []string{f, filepath.Join(owned, "f")} {
		if uid, gid := idsOf(t, p); uid != 1234 || gid != 4321 {
			t.Errorf("%s after chown 1234:4321: %d:%d", p, uid, gid)
		}
	}
	if err := os.Symlink("f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(dir, "l"), 55, 66); err != nil {
		t.Fatalf("lchown of a symlink: %v", err)
	}
	if uid, gid := idsOf(t, filepath.Join(owned, "l")); uid != 55 || gid != 66 {
		t.Errorf("the owner's symlink after lchown 55:66: %d:%d", uid, gid)
	}
	if uid, _ := idsOf(t, filepath.Join(owned, "f")); uid != 1234 {
		t.Errorf("lchown of a symlink changed its target too")
	}
}

// TestMountIdmap: with --idmap user (the default) files owned by the owner of the share's
// folder show as the mounting user's, and chown to the mounting user means the owner's IDs;
// with --idmap none every ID shows as the owner numbers it.
func TestMountIdmap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test gives the share's folder to another user")
	}
	for _, idmap := range []string{"", "none"} {
		t.Run("idmap="+idmap, func(t *testing.T) {
			needFUSE(t)
			a, b := peertest.Pair(t)
			m := &mounted{a: a, b: b, share: t.TempDir(), mnt: t.TempDir()}
			if err := os.Chown(m.share, 1000, 1000); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(m.share, "theirs"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(filepath.Join(m.share, "theirs"), 1000, 1000); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(m.share, "other"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(filepath.Join(m.share, "other"), 2000, 2000); err != nil {
				t.Fatal(err)
			}
			a.Share("m", m.share, false, "beta")
			a.Update(func(f *config.File) error { f.Shares[0].Privileged = true; return nil })
			if _, err := b.N.Mount(context.Background(), api.MountParams{Peer: "alpha", Share: "m", Dir: m.mnt, Idmap: idmap}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.N.Unmount(context.Background(), api.UnmountParams{Dir: m.mnt}) })
			mine := uint32(1000)
			if idmap == "" {
				mine = 0 // the test's own uid and gid
			}
			if uid, gid := idsOf(t, filepath.Join(m.mnt, "theirs")); uid != mine || gid != mine {
				t.Errorf("a file of the share folder's owner shows as %d:%d, want %d:%d", uid, gid, mine, mine)
			}
			if uid, gid := idsOf(t, filepath.Join(m.mnt, "other")); uid != 2000 || gid != 2000 {
				t.Errorf("a file of another user shows as %d:%d, want 2000:2000", uid, gid)
			}
			if err := os.Chown(filepath.Join(m.mnt, "other"), int(mine), int(mine)); err != nil {
				t.Fatal(err)
			}
			if uid, gid := idsOf(t, filepath.Join(m.share, "other")); uid != 1000 || gid != 1000 {
				t.Errorf("chown to %d:%d in the mount made %d:%d on the owner, want 1000:1000", mine, mine, uid, gid)
			}
		})
	}
}

// TestMountSpecialFiles: mkfifo, mknod of a FIFO, a socket and a regular file, and bind of a
// Unix socket make them on the owner; a FIFO and a socket work as local objects of the
// mounting machine. A device node is EPERM unless the share is privileged.
func TestMountSpecialFiles(t *testing.T) {
	m := mountShare(t)
	dir, owned := createdDir(t, m, "d")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o640); err != nil {
		t.Fatalf("mkfifo in the mount: %v", err)
	}
	for _, p := range []string{fifo, filepath.Join(owned, "fifo")} {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO || st.Mode&0o777 != 0o640&^0o022 {
			t.Errorf("%s: mode %#o, %v; want a FIFO of 0640 under the umask", p, st.Mode, err)
		}
	}
	// A FIFO is a local object: a writer and a reader here meet in the kernel.
	done := make(chan error, 1)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			_, err = w.Write([]byte("through the pipe"))
			w.Close()
		}
		done <- err
	}()
	r, err := os.Open(fifo)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if werr := <-done; werr != nil || err != nil || string(got) != "through the pipe" {
		t.Fatalf("through the FIFO: %q, %v, %v", got, err, werr)
	}
	if err := syscall.Mknod(filepath.Join(dir, "sock"), syscall.S_IFSOCK|0o600, 0); err != nil {
		t.Fatalf("mknod of a socket: %v", err)
	}
	if err := syscall.Mknod(filepath.Join(dir, "reg"), syscall.S_IFREG|0o600, 0); err != nil {
		t.Fatalf("mknod of a regular file: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(owned, "reg")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the owner's reg: %v, %v", fi, err)
	}
	if err := syscall.Mknod(filepath.Join(dir, "fifo"), syscall.S_IFIFO|0o600, 0); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("mknod over an existing name: %v, want EEXIST", err)
	}
	// bind(2) makes the socket; connect(2) here reaches the listener here.
	sock := filepath.Join(dir, "listener")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("binding a Unix socket in the mount: %v", err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("connecting to the socket in the mount: %v", err)
	}
	got, err = io.ReadAll(c)
	c.Close()
	if err != nil || string(got) != "hello" {
		t.Fatalf("through the socket: %q, %v", got, err)
	}
	if fi, err := os.Lstat(filepath.Join(owned, "listener")); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the owner's listener: %v, %v; want a socket", fi, err)
	}
	if os.Geteuid() != 0 {
		return
	}
	null := filepath.Join(dir, "null")
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("mknod of a device in a share that is not privileged: %v, want EPERM", err)
	}
	privileged(t, m, true)
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod of a device in a privileged share: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(owned, "null"), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFCHR || st.Rdev != unix.Mkdev(1, 3) {
		t.Fatalf("the owner's null: mode %#o rdev %#x, %v", st.Mode, st.Rdev, err)
	}
}

// asUser runs the shell command script as uid and gid 1000 and returns its combined output
// and error.
func asUser(t *testing.T, script string) (string, error) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestMountAllowOther: with --allow-other another user may use the mount, with mode bits
// checked by the kernel as on a local disk, and what it creates is its own (in a privileged
// share); without it the mount is the mounting user's alone.
func TestMountAllowOther(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test runs commands as another user")
	}
	needFUSE(t)
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprint("allow_other=", allow), func(t *testing.T) {
			a, b := peertest.Pair(t)
			m := &mounted{a: a, b: b, share: t.TempDir(), mnt: t.TempDir()}
			for _, d := range []string{filepath.Dir(m.mnt), m.mnt, filepath.Dir(m.share), m.share} {
				if err := os.Chmod(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Mkdir(filepath.Join(m.share, "u"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(filepath.Join(m.share, "u"), 1000, 1000); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(m.share, "roots"), []byte("root's\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			a.Share("m", m.share, false, "beta")
			a.Update(func(f *config.File) error { f.Shares[0].Privileged = true; return nil })
			if _, err := b.N.Mount(context.Background(), api.MountParams{Peer: "alpha", Share: "m", Dir: m.mnt, AllowOther: allow}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.N.Unmount(context.Background(), api.UnmountParams{Dir: m.mnt}) })
			u := filepath.Join(m.mnt, "u")
			out, err := asUser(t, "cat "+filepath.Join(m.mnt, "roots"))
			if !allow {
				if err == nil {
					t.Fatalf("another user read the mount without --allow-other: %q", out)
				}
				return
			}
			if err != nil || out != "root's\n" {
				t.Fatalf("another user reading a file of mode 0644: %q, %v", out, err)
			}
			if out, err := asUser(t, "echo x >> "+filepath.Join(m.mnt, "roots")); err == nil {
				t.Fatalf("another user wrote root's file of mode 0644: %q", out)
			}
			script := "set -e; cd " + u + "; echo one > f; mkdir d; echo two >> f; echo three > d/g; ln -s f l; mkfifo p; cat f; ls -ln f | cut -d' ' -f3,4"
			out, err = asUser(t, script)
			if err != nil || out != "one\ntwo\n1000 1000\n" {
				t.Fatalf("another user working in its own directory: %q, %v", out, err)
			}
			for _, name := range []string{"f", "d", "d/g", "l", "p"} {
				if uid, gid := idsOf(t, filepath.Join(m.share, "u", name)); uid != 1000 || gid != 1000 {
					t.Errorf("%s made by user 1000 is %d:%d on the owner", name, uid, gid)
				}
			}
		})
	}
}

// TestMountWriteWhilePassthroughRead: opening a file for writing while another descriptor
// reads it through FUSE passthrough succeeds (it answered ETXTBSY), both see the same data at
// once, and close sends the writes to the owner.
func TestMountWriteWhilePassthroughRead(t *testing.T) {
	m := mountShare(t)
	peertest.WriteRandomFile(t, filepath.Join(m.share, "f.bin"), 4<<20, 31)
	want, _ := os.ReadFile(filepath.Join(m.share, "f.bin"))
	p := filepath.Join(m.mnt, "f.bin")
	if got := cacheBypassingPages(t, p); !bytes.Equal(got, want) {
		t.Fatal("first read differs")
	}
	pass := counter(t, m, "passthrough_opens")
	r, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if counter(t, m, "passthrough_opens") == pass {
		t.Skip("the kernel refused FUSE passthrough here (needs CAP_SYS_ADMIN and a kernel with FUSE passthrough)")
	}
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("opening for writing a file read through passthrough: %v", err)
	}
	if _, err := w.WriteAt([]byte("HELLO"), 1000); err != nil {
		t.Fatal(err)
	}
	copy(want[1000:], "HELLO")
	buf := make([]byte, 5)
	if _, err := r.ReadAt(buf, 1000); err != nil || string(buf) != "HELLO" {
		t.Fatalf("the reader sees %q (%v) after the writer wrote HELLO", buf, err)
	}
	a, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("a second writer: %v", err)
	}
	if _, err := a.Write([]byte("TAIL")); err != nil {
		t.Fatal(err)
	}
	want = append(want, "TAIL"...)
	if fi, err := os.Stat(p); err != nil || fi.Size() != int64(len(want)) {
		t.Fatalf("size through the mount after an append: %v, %v; want %d", fi, err, len(want))
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close of the writer: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(m.share, "f.bin")); !bytes.Equal(got, want) {
		t.Fatalf("the owner has %d bytes, not what was written (%d)", len(got), len(want))
	}
	got := make([]byte, len(want))
	if n, err := r.ReadAt(got, 0); n != len(want) || !bytes.Equal(got, want) {
		t.Fatalf("the reader reads %d bytes (%v), not what was written", n, err)
	}
	// Truncation through a third writer reaches the reader and the owner.
	if err := os.Truncate(p, 100); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.ReadAt(got, 0); n != 100 {
		t.Fatalf("the reader reads %d bytes after a truncate to 100", n)
	}
	if fi, err := os.Stat(filepath.Join(m.share, "f.bin")); err != nil || fi.Size() != 100 {
		t.Fatalf("the owner's file after a truncate to 100: %v, %v", fi, err)
	}
	// So does an open with O_TRUNC, and what it writes.
	if err := os.WriteFile(p, []byte("new"), 0o644); err != nil {
		t.Fatalf("O_TRUNC write during a passthrough read: %v", err)
	}
	if n, _ := r.ReadAt(got, 0); string(got[:n]) != "new" {
		t.Fatalf("the reader reads %q after an O_TRUNC write of %q", got[:n], "new")
	}
	if b, _ := os.ReadFile(filepath.Join(m.share, "f.bin")); string(b) != "new" {
		t.Fatalf("the owner has %q", b)
	}
}
