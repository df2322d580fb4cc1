//go:build linux

package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/peertest"
)

// obs records one observation of a case: a label and a value that must be equal on the
// native directory and on the mount (an errno name, a mode, a size, a relation between two
// timestamps such as "after", "same"; never a raw timestamp or inode number, which differ
// between the two).
type obs func(label string, value any)

// A case runs in its own fresh, empty directory dir (absolute path) and records what it sees.
type caseFunc func(dir string, o obs)

type caseSpec struct {
	name     string
	run      caseFunc
	uid, gid int // the child's credentials when asUser set them; -1: the test's own
	root     bool
	differs  string // why the mount deliberately answers otherwise (differsBecause)
}

type caseOpt func(*caseSpec)

// asUser runs the child as this uid/gid; its directory is chowned to them. The mount it runs
// in lets other users in (see allowOther).
func asUser(uid, gid int) caseOpt {
	return func(c *caseSpec) { c.uid, c.gid = uid, gid }
}

// needRoot skips the case with a message when the test does not run as root.
func needRoot() caseOpt {
	return func(c *caseSpec) { c.root = true }
}

// differsBecause marks a case whose behaviour the mount deliberately does not share with a
// local disk, for the reason given (docs/ARCHITECTURE.md lists them): the case still runs,
// its differences are logged and it is skipped with the reason; it fails once the two agree,
// so that the mark goes when the difference does.
func differsBecause(reason string) caseOpt {
	return func(c *caseSpec) { c.differs = reason }
}

var cases = map[string]*caseSpec{}

// register adds a case; names are unique, e.g. "create/mode-0000".
func register(name string, f caseFunc, opts ...caseOpt) {
	if _, dup := cases[name]; dup {
		panic("conformance: case registered twice: " + name)
	}
	c := &caseSpec{name: name, run: f, uid: -1, gid: -1}
	for _, opt := range opts {
		opt(c)
	}
	cases[name] = c
}

// allowOther, when a case file sets it, edits the mount parameters of the mount that cases
// run as another user use, so that the kernel lets other users in (allow_other). Without it
// those cases are skipped.
var allowOther func(*api.MountParams)

// errnoName names the errno inside err ("OK" for nil): "ENOENT", "EEXIST", ...
func errnoName(err error) string {
	if err == nil {
		return "OK"
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		if name := unix.ErrnoName(en); name != "" {
			return name
		}
		return fmt.Sprintf("errno %d", int(en))
	}
	return "error " + err.Error()
}

// timeRel says how a relates to b: "before", "same" or "after".
func timeRel(a, b unix.Timespec) string {
	switch {
	case a.Sec < b.Sec || a.Sec == b.Sec && a.Nsec < b.Nsec:
		return "before"
	case a == b:
		return "same"
	}
	return "after"
}

// The child's environment: the case to run and the directory to run it in.
const (
	envCase = "PEERFS_CONFORMANCE_CASE"
	envDir  = "PEERFS_CONFORMANCE_DIR"
)

// childTimeout bounds one run of a case, so a call that hangs on the mount fails the case
// instead of the whole test binary.
const childTimeout = 60 * time.Second

func TestMain(m *testing.M) {
	if name := os.Getenv(envCase); name != "" {
		os.Exit(runChild(name, os.Getenv(envDir)))
	}
	os.Exit(m.Run())
}

// observation is one line a child prints.
type observation struct {
	Label string          `json:"label"`
	Value json.RawMessage `json:"value"`
}

// runChild runs one case in dir and prints its observations, one JSON object a line.
func runChild(name, dir string) int {
	c, ok := cases[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "no conformance case named %q\n", name)
		return 2
	}
	// Both runs start from the same umask whatever the test's caller has; a case that
	// needs another one sets it.
	unix.Umask(0o022)
	if err := os.Chdir(dir); err != nil {
		fmt.Fprintf(os.Stderr, "case %s: %v\n", name, err)
		return 2
	}
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	code := 0
	func() {
		defer func() {
			if r := recover(); r != nil {
				fmt.Fprintf(os.Stderr, "case %s panicked: %v\n%s", name, r, debug.Stack())
				code = 2
			}
		}()
		c.run(dir, func(label string, value any) {
			v, err := json.Marshal(value)
			if err != nil {
				v, _ = json.Marshal(fmt.Sprintf("%#v", value))
			}
			enc.Encode(observation{Label: label, Value: v})
		})
	}()
	out.Flush()
	return code
}

// fixture is what the cases run against: a directory on the local disk and a peerfs mount,
// and, made the first time a case needs it, a second mount that lets other users in.
type fixture struct {
	native string // a directory on the machine's own file system
	mnt    string // the peerfs mount
	share  string // the owner's folder behind mnt

	owner, peer *peertest.Node

	otherOnce                  sync.Once
	otherShareDir, otherMntDir string // made empty up front, used by the first case that needs them
	otherMnt                   string // the mount with allowOther applied; "" until made
	otherErr                   string // why it could not be made

	binOnce sync.Once
	bin     string // a copy of the test binary other users can run
	binErr  error
}

// openUp makes dir and its parent searchable by every user (t.TempDir makes them 0700), so
// children running as other users can reach the case directories.
func openUp(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConformance(t *testing.T) {
	if len(cases) == 0 {
		t.Skip("no cases registered")
	}
	peertest.NeedFUSE(t)
	f := &fixture{native: t.TempDir(), share: t.TempDir(), mnt: t.TempDir(),
		otherShareDir: t.TempDir(), otherMntDir: t.TempDir()}
	for _, d := range []string{f.native, f.share, f.mnt, f.otherShareDir, f.otherMntDir} {
		openUp(t, d)
	}
	f.owner, f.peer = peertest.Pair(t)
	f.owner.Share("conformance", f.share, false, f.peer.Name)
	privileged(f.owner)
	peertest.Mount(t, f.owner, f.peer, "conformance", f.mnt)
	t.Cleanup(f.cleanup)

	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := cases[name]
		t.Run(name, func(t *testing.T) { f.runCase(t, c) })
	}
}

// runCase runs c natively and on the mount and compares the two runs' observations.
func (f *fixture) runCase(t *testing.T, c *caseSpec) {
	if c.root && os.Geteuid() != 0 {
		t.Skip("needs root: run the test as root")
	}
	mnt := f.mnt
	if c.uid >= 0 {
		if os.Geteuid() != 0 {
			t.Skip("runs as another user: run the test as root")
		}
		if mnt, _ = f.otherMount(t); mnt == "" {
			t.Skip(f.otherErr)
		}
	}
	dirName := strings.ReplaceAll(c.name, "/", "_")
	nativeDir, mountDir := filepath.Join(f.native, dirName), filepath.Join(mnt, dirName)
	// Made by mkdir(2) in each, as a user would make a folder to work in, and given to the
	// user a case runs as by chown(2) in each (the shares are privileged): a chown on the
	// owner's disk would reach the mount's kernel only with its change event, after the
	// case may have started.
	for _, d := range []string{nativeDir, mountDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if c.uid >= 0 {
		for _, d := range []string{nativeDir, mountDir} {
			if err := os.Chown(d, c.uid, c.gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	native := f.child(t, c, nativeDir)
	mount := f.child(t, c, mountDir)
	d := diffObservations(native, mount)
	switch {
	case c.differs != "" && d == "":
		t.Errorf("marked as a deliberate difference (%s), but the mount now answers as the local disk: remove the mark", c.differs)
	case c.differs != "":
		t.Logf("the mount differs from the local disk (%s against %s):\n%s", mountDir, nativeDir, d)
		t.Skipf("a deliberate difference: %s", c.differs)
	case d != "":
		t.Errorf("the mount differs from the local disk (%s against %s):\n%s", mountDir, nativeDir, d)
	case testing.Verbose():
		t.Logf("%d observations, all equal", len(native))
	}
}

// child runs c in dir in a child process and returns its observations.
func (f *fixture) child(t *testing.T, c *caseSpec, dir string) []observation {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if c.uid >= 0 {
		bin = f.sharedBinary(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	// The child changes to dir itself (runChild): a chdir between fork and exec into the
	// mount served by this very process can deadlock it (the kernel asks the server, whose
	// runtime waits for the vforked thread; go-fuse's "Deadlocks", 1a).
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), envCase+"="+c.name, envDir+"="+dir)
	if c.uid >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(c.uid), Gid: uint32(c.gid)}}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			t.Fatalf("case %s in %s did not finish in %v (a call hung)\nstdout:\n%s\nstderr:\n%s", c.name, dir, childTimeout, stdout.Bytes(), stderr.Bytes())
		}
		t.Fatalf("case %s in %s: %v\nstdout:\n%s\nstderr:\n%s", c.name, dir, err, stdout.Bytes(), stderr.Bytes())
	}
	var out []observation
	dec := json.NewDecoder(&stdout)
	for {
		var o observation
		if err := dec.Decode(&o); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("case %s in %s printed something that is not an observation: %v\nstderr:\n%s", c.name, dir, err, stderr.Bytes())
		}
		out = append(out, o)
	}
	if stderr.Len() > 0 {
		t.Logf("case %s in %s wrote to stderr:\n%s", c.name, dir, stderr.Bytes())
	}
	return out
}

// diffObservations lists both runs side by side when they differ, marking the lines that
// differ, and returns "" when they are equal. Lines are paired by label, so a run that
// recorded more or fewer lines somewhere (an extra line after an error) shows as lines one
// side lacks, and the rest still lines up.
func diffObservations(native, mount []observation) string {
	type row struct{ label, a, b string }
	var rows []row
	differ := false
	// indexFrom returns the index of the first line labelled label in list from i, or -1.
	indexFrom := func(list []observation, i int, label string) int {
		for ; i < len(list); i++ {
			if list[i].Label == label {
				return i
			}
		}
		return -1
	}
	i, j := 0, 0
	for i < len(native) || j < len(mount) {
		switch {
		case i < len(native) && j < len(mount) && native[i].Label == mount[j].Label:
			a, b := string(native[i].Value), string(mount[j].Value)
			differ = differ || a != b
			rows = append(rows, row{native[i].Label, a, b})
			i, j = i+1, j+1
		case i < len(native) && (j >= len(mount) || indexFrom(mount, j, native[i].Label) < 0):
			differ = true
			rows = append(rows, row{native[i].Label, string(native[i].Value), "(nothing)"})
			i++
		default:
			differ = true
			rows = append(rows, row{mount[j].Label, "(nothing)", string(mount[j].Value)})
			j++
		}
	}
	if !differ {
		return ""
	}
	width := [2]int{len("label"), len("native")}
	for _, r := range rows {
		width[0], width[1] = max(width[0], len(r.label)), max(width[1], len(r.a))
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "  %-*s  %-*s  %s\n", width[0], "label", width[1], "native", "mount")
	for _, r := range rows {
		mark := " "
		if r.a != r.b {
			mark = "!"
		}
		fmt.Fprintf(&sb, "%s %-*s  %-*s  %s\n", mark, width[0], r.label, width[1], r.a, r.b)
	}
	return sb.String()
}

// otherMount returns the mount that lets other users in and its owner's folder, making them
// the first time; "" when no case file enabled one.
func (f *fixture) otherMount(t *testing.T) (mnt, share string) {
	f.otherOnce.Do(func() {
		if allowOther == nil {
			f.otherErr = "runs as another user, and no case file enables a mount that lets other users in (allowOther)"
			return
		}
		// It outlives this subtest: f.cleanup unmounts it when TestConformance ends.
		share, mnt := f.otherShareDir, f.otherMntDir
		f.owner.Share("conformance-other", share, false, f.peer.Name)
		privileged(f.owner)
		p := api.MountParams{Peer: f.owner.Name, Share: "conformance-other", Dir: mnt}
		allowOther(&p)
		if _, err := f.peer.N.Mount(context.Background(), p); err != nil {
			f.otherErr = "mounting with allowOther: " + err.Error()
			return
		}
		f.otherMnt = mnt
	})
	return f.otherMnt, f.otherShareDir
}

// privileged lets the peer do on the owner's shares what root may do on the local disk
// (chown, set-id bits, device nodes), so that the cases compare like with like.
func privileged(owner *peertest.Node) {
	owner.Update(func(c *config.File) error {
		for i := range c.Shares {
			c.Shares[i].Privileged = true
		}
		return nil
	})
}

// cleanup unmounts the mount for other users and removes the binary copy; it runs before the
// main mount is unmounted and the nodes stop.
func (f *fixture) cleanup() {
	if f.otherMnt != "" {
		f.peer.N.Unmount(context.Background(), api.UnmountParams{Dir: f.otherMnt})
	}
	if f.bin != "" {
		os.RemoveAll(filepath.Dir(f.bin))
	}
}

// sharedBinary returns a copy of the test binary that any user can run (the go tool builds
// it in a directory only its user can enter).
func (f *fixture) sharedBinary(t *testing.T) string {
	f.binOnce.Do(func() {
		self, err := os.Executable()
		if err != nil {
			f.binErr = err
			return
		}
		dir, err := os.MkdirTemp("", "peerfs-conformance-bin-")
		if err != nil {
			f.binErr = err
			return
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			f.binErr = err
			return
		}
		data, err := os.ReadFile(self)
		if err != nil {
			f.binErr = err
			return
		}
		f.bin = filepath.Join(dir, filepath.Base(self))
		f.binErr = os.WriteFile(f.bin, data, 0o755)
	})
	if f.binErr != nil {
		t.Fatalf("copying the test binary for another user: %v", f.binErr)
	}
	return f.bin
}

// TestDiffObservations checks that equal runs compare equal and that a difference, in a value
// or in how far a run got, is shown with both runs and the differing lines marked.
func TestDiffObservations(t *testing.T) {
	line := func(label, value string) observation {
		return observation{Label: label, Value: json.RawMessage(value)}
	}
	native := []observation{line("open", `"OK"`), line("mode", `"0644"`)}
	if d := diffObservations(native, native); d != "" {
		t.Fatalf("equal runs differ:\n%s", d)
	}
	d := diffObservations(native, []observation{line("open", `"OK"`), line("mode", `"0600"`)})
	if !strings.Contains(d, `! mode   "0644"  "0600"`) || !strings.Contains(d, `  open   "OK"    "OK"`) {
		t.Fatalf("a different value is not shown as one:\n%s", d)
	}
	d = diffObservations(native, native[:1])
	if !strings.Contains(d, `! mode   "0644"  (nothing)`) {
		t.Fatalf("a run that stopped early is not shown as one:\n%s", d)
	}
	// A line one run lacks leaves the rest paired by label.
	d = diffObservations(append([]observation{line("stat", `"EIO"`)}, native...), native)
	if !strings.Contains(d, `! stat   "EIO"   (nothing)`) || !strings.Contains(d, `  mode   "0644"  "0644"`) {
		t.Fatalf("a line one run lacks is not shown as one:\n%s", d)
	}
}
