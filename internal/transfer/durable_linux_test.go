package transfer

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/peerfs/peerfs/internal/rootfs"
)

// straceChild marks the copy of the test binary that TestDurable runs under strace.
const straceChild = "PEERFS_TEST_DURABLE_CHILD"

// TestDurable: a file is reported sent or pulled only once it would survive a power cut: its
// data synced before the rename that gives it its name, its directory synced after the rename.
// A pulled tree syncs each directory once, not once per file. The test runs the transfers in a
// copy of itself under strace and reads the system calls they made, so it sees the real
// fsyncs and their order.
func TestDurable(t *testing.T) {
	if os.Getenv(straceChild) != "" {
		durableChild(t, os.Getenv(straceChild))
		return
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed: it is how this test sees the fsyncs")
	}
	base := t.TempDir()
	trace := filepath.Join(base, "trace")
	cmd := exec.Command(strace, "-f", "-qq", "-y", "-e", "trace=fsync,fdatasync,rename,renameat,renameat2",
		"-e", "signal=none", "-o", trace, os.Args[0], "-test.run=^TestDurable$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), straceChild+"="+base)
	if out, err := cmd.CombinedOutput(); err != nil {
		if strings.Contains(string(out), "PTRACE") || strings.Contains(string(out), "ptrace") {
			t.Skipf("strace cannot trace here: %s", out)
		}
		t.Fatalf("the traced transfers failed: %v\n%s", err, out)
	}
	calls := readTrace(t, trace)

	// One file sent into the owner's share, one pulled from it.
	for _, c := range []struct{ what, dir, name string }{
		{"send", filepath.Join(base, "owner"), "sent.bin"},
		{"pull", filepath.Join(base, "dest"), "pulled.bin"},
	} {
		part := filepath.Join(c.dir, "."+c.name+rootfs.PartSuffix)
		rename := find(calls, func(s call) bool {
			return s.isRename() && strings.Contains(s.text, `"`+c.name+`"`) && strings.Contains(s.text, c.dir)
		})
		fileSync := find(calls, func(s call) bool { return s.isSync() && s.fd() == part })
		dirSync := findLast(calls, func(s call) bool { return s.isSync() && s.fd() == c.dir })
		switch {
		case rename < 0:
			t.Errorf("%s: no rename of %s found in the trace", c.what, c.name)
		case fileSync < 0 || calls[fileSync].end > calls[rename].start:
			t.Errorf("%s: the data of %s was not synced before its rename", c.what, c.name)
		case dirSync < 0 || calls[dirSync].start < calls[rename].end:
			t.Errorf("%s: the directory %s was not synced after %s was renamed into it", c.what, c.dir, c.name)
		}
	}

	// A pulled tree of 3 directories and 60 files: each file synced, each directory once.
	tree := filepath.Join(base, "treedest", "tree")
	files, dirs := map[string]int{}, map[string]int{}
	for _, c := range calls {
		if !c.isSync() || !strings.HasPrefix(c.fd(), filepath.Dir(tree)) {
			continue
		}
		if strings.HasSuffix(c.fd(), rootfs.PartSuffix) {
			files[c.fd()]++
		} else {
			dirs[c.fd()]++
		}
	}
	if len(files) != 60 {
		t.Errorf("tree pull: %d files synced, want 60", len(files))
	}
	for _, d := range []string{filepath.Dir(tree), tree, filepath.Join(tree, "a"), filepath.Join(tree, "b")} {
		if dirs[d] != 1 {
			t.Errorf("tree pull: directory %s synced %d times, want once", d, dirs[d])
		}
	}
	if len(dirs) != 4 {
		t.Errorf("tree pull: directories synced: %v, want the 3 of the tree and the one holding it", dirs)
	}
}

// durableChild makes the transfers TestDurable traces, under base.
func durableChild(t *testing.T, base string) {
	owner, src, dest, treeDest := filepath.Join(base, "owner"), filepath.Join(base, "src"), filepath.Join(base, "dest"), filepath.Join(base, "treedest")
	for _, d := range []string{owner, src, dest, treeDest, filepath.Join(owner, "tree", "a"), filepath.Join(owner, "tree", "b")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	randomFile(t, filepath.Join(src, "sent.bin"), 100<<10, 5)
	randomFile(t, filepath.Join(owner, "pulled.bin"), 100<<10, 6)
	for i := range 60 {
		dir := []string{"tree", "tree/a", "tree/b"}[i%3]
		randomFile(t, filepath.Join(owner, dir, "f"+string(rune('a'+i%26))+string(rune('a'+i/26))), 3000, uint64(i))
	}
	peer := servePeer(t, "s", owner)
	ctx := context.Background()
	if _, err := Send(ctx, peer, filepath.Join(src, "sent.bin"), "s", "", Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Pull(ctx, peer, "s", "pulled.bin", dest, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Pull(ctx, peer, "s", "tree", treeDest, Options{}); err != nil {
		t.Fatal(err)
	}
}

// call is one system call in an strace log: its text and the lines where it began and ended.
type call struct {
	text       string
	start, end int
}

var fdPath = regexp.MustCompile(`^\w+\(\d+<([^>]*)>`)

func (c call) isSync() bool {
	return strings.HasPrefix(c.text, "fsync(") || strings.HasPrefix(c.text, "fdatasync(")
}
func (c call) isRename() bool { return strings.HasPrefix(c.text, "rename") }

// fd returns the path of the call's first argument, a descriptor that strace -y decoded.
func (c call) fd() string {
	if m := fdPath.FindStringSubmatch(c.text); m != nil {
		return m[1]
	}
	return ""
}

// readTrace reads strace -f output: "PID call(...) = R", or a call split into "<unfinished ...>"
// and "<... name resumed>" lines, which are joined.
func readTrace(t *testing.T, path string) []call {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var calls []call
	pending := map[string]int{} // pid -> index in calls
	sc := bufio.NewScanner(f)
	for line := 0; sc.Scan(); line++ {
		pid, rest, _ := strings.Cut(sc.Text(), " ")
		rest = strings.TrimSpace(rest)
		switch {
		case strings.HasSuffix(rest, "<unfinished ...>"):
			pending[pid] = len(calls)
			calls = append(calls, call{text: strings.TrimSuffix(rest, "<unfinished ...>"), start: line, end: -1})
		case strings.HasPrefix(rest, "<..."):
			if i, ok := pending[pid]; ok {
				calls[i].end = line
				delete(pending, pid)
			}
		default:
			calls = append(calls, call{text: rest, start: line, end: line})
		}
	}
	return calls
}

func find(calls []call, match func(call) bool) int {
	for i, c := range calls {
		if match(c) {
			return i
		}
	}
	return -1
}

func findLast(calls []call, match func(call) bool) int {
	for i := len(calls) - 1; i >= 0; i-- {
		if match(calls[i]) {
			return i
		}
	}
	return -1
}
