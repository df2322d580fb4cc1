//go:build linux

package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/posixtest"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/peertest"
)

// needFUSE skips a test on machines without FUSE.
func needFUSE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse: mount tests need FUSE (load the fuse module)")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("fusermount3 not found: install fuse3 (make deps)")
	}
}

type mounted struct {
	a, b  *peertest.Node
	share string // the owner's folder
	mnt   string // beta's mount of it
}

// mountShare starts two nodes; alpha shares a folder read-write with beta, which mounts it.
func mountShare(t *testing.T, params ...func(*api.MountParams)) *mounted {
	t.Helper()
	needFUSE(t)
	a, b := peertest.Pair(t)
	m := &mounted{a: a, b: b, share: t.TempDir(), mnt: t.TempDir()}
	a.Share("m", m.share, false, "beta")
	p := api.MountParams{Peer: "alpha", Share: "m", Dir: m.mnt, Writes: os.Getenv("PEERFS_TEST_WRITES")}
	for _, f := range params {
		f(&p)
	}
	if _, err := b.N.Mount(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.N.Unmount(context.Background(), api.UnmountParams{Dir: m.mnt}); err != nil && api.CodeOf(err) != api.CodeNotFound {
			t.Errorf("unmount: %v", err)
		}
	})
	return m
}

// posixExcluded are the go-fuse POSIX tests that do not apply to a network filesystem whose
// owner holds the only copy, each with its reason.
var posixExcluded = map[string]string{
	"FdLeak":          "counts the test process's own fds, which the in-process FUSE server and its links also use",
	"OpenSymlinkRace": "races symlink replacement against opens for 10 s; exercised instead by the workload tests",
	"FcntlFlockLocksFile": "expects two descriptors of one process to conflict; the kernel keeps POSIX locks of a " +
		"peerfs mount locally (like sshfs), where one process is one lock owner",
}

func TestMountPosix(t *testing.T) {
	m := mountShare(t)
	for name, test := range posixtest.All {
		t.Run(name, func(t *testing.T) {
			if why, ok := posixExcluded[name]; ok {
				t.Skip(why)
			}
			dir := filepath.Join(m.mnt, name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			test(t, dir)
		})
	}
}

func TestMountReadWriteCoherence(t *testing.T) {
	m := mountShare(t)
	// Owner -> mount.
	peertest.WriteRandomFile(t, filepath.Join(m.share, "big.bin"), 20<<20, 11)
	got, err := os.ReadFile(filepath.Join(m.mnt, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(m.share, "big.bin"))
	if !bytes.Equal(got, want) {
		t.Fatal("content read through the mount differs")
	}
	// Mount -> owner: byte-identical after close.
	data := bytes.Repeat([]byte("peerfs "), 3<<20)
	if err := os.WriteFile(filepath.Join(m.mnt, "out.txt"), data, 0o640); err != nil {
		t.Fatal(err)
	}
	onOwner, err := os.ReadFile(filepath.Join(m.share, "out.txt"))
	if err != nil || !bytes.Equal(onOwner, data) {
		t.Fatalf("owner has %d bytes (%v), want %d identical", len(onOwner), err, len(data))
	}
	// A change on the owner is visible through the mount within 1 s: a new file, new
	// content, a removal.
	eventually := func(want string) {
		t.Helper()
		deadline := time.Now().Add(time.Second)
		for {
			b, err := os.ReadFile(filepath.Join(m.mnt, "note.txt"))
			if err == nil && string(b) == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 1 s the mount shows %q (%v), want %q", b, err, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	os.WriteFile(filepath.Join(m.share, "note.txt"), []byte("v1"), 0o644)
	eventually("v1")
	os.WriteFile(filepath.Join(m.share, "note.txt"), []byte("version two"), 0o644)
	eventually("version two")
	os.Remove(filepath.Join(m.share, "note.txt"))
	deadline := time.Now().Add(time.Second)
	for {
		if _, err := os.Stat(filepath.Join(m.mnt, "note.txt")); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a file removed on the owner is still visible after 1 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The mount shows as fuse.peerfs.
	mounts, _ := os.ReadFile("/proc/mounts")
	if !strings.Contains(string(mounts), m.mnt+" fuse.peerfs") {
		t.Fatalf("/proc/mounts has no fuse.peerfs line for %s", m.mnt)
	}
}

func TestMountStatsAndBlksize(t *testing.T) {
	m := mountShare(t, func(p *api.MountParams) { p.Blksize = 256 << 10 })
	var st syscall.Stat_t
	os.WriteFile(filepath.Join(m.share, "f"), []byte("x"), 0o644)
	if err := syscall.Stat(filepath.Join(m.mnt, "f"), &st); err != nil {
		t.Fatal(err)
	}
	var fs syscall.Statfs_t
	syscall.Statfs(m.mnt, &fs)
	if st.Blksize != 256<<10 || fs.Bsize != 256<<10 || fs.Blocks == 0 {
		t.Fatalf("st_blksize %d, f_bsize %d, blocks %d", st.Blksize, fs.Bsize, fs.Blocks)
	}
	src := filepath.Join(t.TempDir(), "src")
	peertest.WriteRandomFile(t, src, 8<<20, 12)
	if out, err := exec.Command("cp", src, filepath.Join(m.mnt, "copy")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	res, err := m.b.N.Stats(context.Background(), api.UnmountParams{Dir: m.mnt})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Ops {
		if o.Name == "write" {
			if o.Bytes != 8<<20 || o.Avg < 128<<10 {
				t.Fatalf("write stats %+v: cp should write in large requests", o)
			}
			if o.TotalMs <= 0 {
				t.Fatalf("write stats %+v: no time for %d calls", o, o.Calls)
			}
			return
		}
	}
	t.Fatalf("no write stats in %+v", res.Ops)
}

// run runs a command in dir and fails the test on error. git gets the directory with -C and
// nothing is started with its working directory inside a mount: this process serves the mount,
// and a fork that chdirs into it can deadlock (go-fuse's "Deadlocks", 1a).
func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	if name == "git" {
		args = append([]string{"-C", dir}, args...)
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = os.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestMountGitAndRsync(t *testing.T) {
	for _, tool := range []string{"git", "rsync"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (make deps)", tool)
		}
	}
	m := mountShare(t)
	// A local repository of a few thousand files to clone.
	repo := filepath.Join(t.TempDir(), "repo")
	files := 3000
	if testing.Short() {
		files = 500
	}
	peertest.MakeTree(t, repo, files, 13)
	run(t, repo, "git", "init", "-q")
	run(t, repo, "git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
	run(t, repo, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tree")
	run(t, m.mnt, "git", "clone", "-q", repo, "clone")
	run(t, filepath.Join(m.mnt, "clone"), "git", "fsck", "--no-progress")
	if out := run(t, filepath.Join(m.mnt, "clone"), "git", "status", "--porcelain"); out != "" {
		t.Fatalf("git status through the mount is not clean:\n%s", out)
	}
	if out := run(t, filepath.Join(m.share, "clone"), "git", "status", "--porcelain"); out != "" {
		t.Fatalf("git status on the owner's copy is not clean:\n%s", out)
	}
	// rsync -a a tree in, then compare with the owner's folder.
	tree := filepath.Join(t.TempDir(), "tree")
	peertest.MakeTree(t, tree, 1000, 14)
	run(t, m.mnt, "rsync", "-a", tree+"/", filepath.Join(m.mnt, "tree")+"/")
	run(t, m.mnt, "diff", "-r", "--no-dereference", tree, filepath.Join(m.share, "tree"))
}

// TestMountBuildCProject builds a small C project inside the mount with make and gcc:
// many small reads, object files written and renamed, timestamps compared by make. A second
// make finds nothing to do (mtimes survive the round trip), and a touched source rebuilds
// exactly its object and the program.
func TestMountBuildCProject(t *testing.T) {
	for _, tool := range []string{"make", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (make deps)", tool)
		}
	}
	m := mountShare(t)
	proj := filepath.Join(m.mnt, "proj")
	if err := os.MkdirAll(filepath.Join(proj, "include"), 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var objs, calls strings.Builder
	for i := 0; i < n; i++ {
		src := fmt.Sprintf("#include \"util.h\"\nint f%d(int x) { return twice(x) + %d; }\n", i, i)
		if err := os.WriteFile(filepath.Join(proj, fmt.Sprintf("f%d.c", i)), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&objs, " f%d.o", i)
		fmt.Fprintf(&calls, "int f%d(int);\n", i)
	}
	files := map[string]string{
		"include/util.h": "static inline int twice(int x) { return 2 * x; }\n",
		"main.c": calls.String() + "#include <stdio.h>\nint main(void) { int s = 0;\n" +
			func() string {
				var b strings.Builder
				for i := 0; i < n; i++ {
					fmt.Fprintf(&b, "s += f%d(1);\n", i)
				}
				return b.String()
			}() + "printf(\"%d\\n\", s); return 0; }\n",
		"Makefile": "OBJS =" + objs.String() + " main.o\nprog: $(OBJS)\n\tgcc -o $@ $(OBJS)\n" +
			"%.o: %.c include/util.h\n\tgcc -Iinclude -O1 -c -o $@.tmp $< && mv $@.tmp $@\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(proj, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, proj, "make", "-C", proj, "-j2")
	// sum of 2*1 + i for i < n
	want := fmt.Sprint(2*n + n*(n-1)/2)
	// Run a copy: this test process serves the mount, and a process it forks must not need
	// the mount before its exec (see run).
	prog, err := os.ReadFile(filepath.Join(proj, "prog"))
	if err != nil {
		t.Fatal(err)
	}
	progCopy := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(progCopy, prog, 0o755); err != nil {
		t.Fatal(err)
	}
	if out := strings.TrimSpace(run(t, proj, progCopy)); out != want {
		t.Fatalf("the program built in the mount prints %q, want %s", out, want)
	}
	// make -q exits 1 when anything would be rebuilt, and run fails the test then.
	run(t, proj, "make", "-C", proj, "-q")
	time.Sleep(10 * time.Millisecond)
	now := time.Now()
	if err := os.Chtimes(filepath.Join(proj, "f3.c"), now, now); err != nil {
		t.Fatal(err)
	}
	out := run(t, proj, "make", "-C", proj)
	if !strings.Contains(out, " f3.c") || strings.Contains(out, " f4.c") || !strings.Contains(out, "-o prog") {
		t.Fatalf("after touching f3.c, make ran:\n%s", out)
	}
	// The owner's copy is a working build tree too.
	if out := strings.TrimSpace(run(t, m.share, filepath.Join(m.share, "proj", "prog"))); out != want {
		t.Fatalf("the owner's copy of the program prints %q, want %s", out, want)
	}
}
