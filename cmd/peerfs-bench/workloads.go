package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// What the workload suites (blocksize, patterns, meta, tree) share:
//
//   - workEnv: a work directory with the owner's folder, two daemons with beta's mount of
//     alpha's share, optionally an sshfs mount of the same folder, and an undo stack that
//     unmounts and stops everything in reverse order, also after an error or a ^C;
//   - the child process that runs every timed loop (runJob), so that what is measured is a
//     process doing system calls, as a C program would, and not this one;
//   - the samples their sections are built from (figures), and the Markdown helpers.
//
// Layout of a work directory:
//
//	owner/      alpha's share "bench": the files the suites read, and what the mounted
//	            workloads write
//	native/     where native workloads write: the owner's disk, outside the share, so native
//	            runs cause no change events on the peerfs link
//	local/      sources of copies into a mount and destinations of copies out of one
//	mnt-peerfs/ beta's mount of alpha:bench
//	mnt-sshfs/  sshfs mount of owner/ through the benchmark's own sshd (ssh/)
//	alpha/, beta/ the daemons' homes; alpha.log, beta.log their logs

type workEnv struct {
	dir      string
	keep     bool // the directory was given with --dir: left in place at the end
	owner    string
	native   string
	local    string
	mnt      string
	sshfsMnt string
	bin      string // the peerfs binary
	peers    *peers
	ssh      *sshServer // nil: no sshfs column
	sshfs    *sshfsMount
	notes    []string
	undo     []func()
}

// newWorkEnv makes the work directory and its folders; the caller writes its test files into
// owner/ and local/ and then calls start. Call close in every case.
func newWorkEnv(o commonOptions, suite string) (*workEnv, error) {
	e := &workEnv{keep: o.Dir != "", bin: o.Peerfs}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("/dev/fuse is missing: the %s benchmark needs FUSE (modprobe fuse, apt-get install fuse3)", suite)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		return nil, fmt.Errorf("fusermount3 is missing: apt-get install fuse3 (or scripts/deps.sh)")
	}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "peerfs-bench-"+suite+"-")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	var err error
	if e.dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	e.owner = filepath.Join(e.dir, "owner")
	e.native = filepath.Join(e.dir, "native")
	e.local = filepath.Join(e.dir, "local")
	e.mnt = filepath.Join(e.dir, "mnt-peerfs")
	e.sshfsMnt = filepath.Join(e.dir, "mnt-sshfs")
	// Leftovers of an interrupted run in a --dir would make the workloads fail.
	if mounted(e.mnt) || mounted(e.sshfsMnt) {
		return nil, fmt.Errorf("%s or %s is still mounted: unmount it first (fusermount3 -u)", e.mnt, e.sshfsMnt)
	}
	os.RemoveAll(e.native)
	for _, d := range []string{e.owner, e.native, e.local, e.mnt, e.sshfsMnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// start starts the daemons and, when withSSHFS is set and the tools are there, an sshd for
// the sshfs column. Nothing is mounted yet.
func (e *workEnv) start(ctx context.Context, withSSHFS bool) error {
	p, err := startPeers(ctx, e.bin, e.dir, e.owner, false)
	if err != nil {
		return err
	}
	e.peers = p
	e.undo = append(e.undo, func() {
		if err := p.unmount(e.mnt); err != nil {
			fmt.Fprintln(os.Stderr, "peerfs-bench: unmounting peerfs:", err)
		}
		p.stop()
		(&mountBench{peers: p}).reportDaemonLog()
	})
	if !withSSHFS {
		return nil
	}
	if _, _, _, missing := sshfsTools(); missing != nil {
		fmt.Fprintf(os.Stderr, "sshfs column skipped: %v\n", missing)
		e.note("sshfs column skipped: %v", missing)
		return nil
	}
	srv, err := startSSHD(ctx, filepath.Join(e.dir, "ssh"))
	if err != nil {
		return fmt.Errorf("starting sshd for the sshfs column: %w (--no-sshfs skips it)", err)
	}
	e.ssh = srv
	e.undo = append(e.undo, srv.stop)
	for _, n := range srv.notes {
		e.note("%s", n)
	}
	e.undo = append(e.undo, func() {
		if err := e.sshfs.unmount(); err != nil {
			fmt.Fprintln(os.Stderr, "peerfs-bench:", err)
		}
	})
	return nil
}

// close undoes everything start did, in reverse order, and removes the work directory unless
// it was given or a mount could not be removed.
func (e *workEnv) close() {
	for i := len(e.undo) - 1; i >= 0; i-- {
		e.undo[i]()
	}
	if e.keep {
		return
	}
	if mounted(e.mnt) || mounted(e.sshfsMnt) {
		fmt.Fprintf(os.Stderr, "peerfs-bench: a mount is still in place; leaving %s\n", e.dir)
		return
	}
	os.RemoveAll(e.dir)
}

func (e *workEnv) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	for _, n := range e.notes {
		if n == s {
			return
		}
	}
	e.notes = append(e.notes, s)
}

// mountPeerfs replaces beta's mount with a fresh one made with the given "peerfs mount" flags
// (--blksize N, --no-passthrough). A fresh mount has fresh inodes, so nothing of the file
// contents is left in the kernel's page cache, and zeroed counters. With cold set, beta's
// daemon is restarted with an empty chunk cache first.
func (e *workEnv) mountPeerfs(ctx context.Context, cold bool, flags ...string) error {
	if err := e.peers.unmount(e.mnt); err != nil {
		return err
	}
	if cold {
		if err := e.peers.restartBeta(ctx, true); err != nil {
			return err
		}
	}
	args := append(append([]string{"mount"}, flags...), "alpha:bench", e.mnt)
	_, err := e.peers.cli(e.peers.homeB, args...)
	return err
}

// mountSSHFS replaces the sshfs mount with a fresh one (sshfs keeps no cache across mounts).
func (e *workEnv) mountSSHFS(ctx context.Context) error {
	if err := e.sshfs.unmount(); err != nil {
		return err
	}
	m, err := e.ssh.mount(ctx, e.owner, e.sshfsMnt)
	if err != nil {
		return err
	}
	e.sshfs = m
	return nil
}

// wtarget is where a suite's workloads run: the peerfs mount, the sshfs mount or the native
// disk. dir is sub of the target as it shows it; ownerDir is the same folder on the owner's
// disk.
type wtarget struct {
	name     string
	dir      string
	ownerDir string
	// setup gives the target a fresh start (a new mount); teardown unmounts.
	setup    func(context.Context) error
	teardown func() error
}

// session gives t a fresh start, runs fn on it and tears it down, then syncs: the next target
// starts without this one's dirty pages to write back.
func (t *wtarget) session(ctx context.Context, fn func() error) (err error) {
	if err := t.setup(ctx); err != nil {
		return fmt.Errorf("setting up: %w", err)
	}
	defer func() {
		if terr := t.teardown(); err == nil && terr != nil {
			err = fmt.Errorf("tearing down: %w", terr)
		}
		unix.Sync()
	}()
	return fn()
}

// targets returns peerfs, sshfs (when started) and native, each working in sub: under the
// mount for the mounts, under native/ for the native disk.
func (e *workEnv) targets(sub string) []*wtarget {
	ts := []*wtarget{{
		name: tPeerfs, dir: filepath.Join(e.mnt, sub), ownerDir: filepath.Join(e.owner, sub),
		setup:    func(ctx context.Context) error { return e.mountPeerfs(ctx, false) },
		teardown: func() error { return e.peers.unmount(e.mnt) },
	}}
	if e.ssh != nil {
		ts = append(ts, &wtarget{
			name: tSSHFS, dir: filepath.Join(e.sshfsMnt, sub), ownerDir: filepath.Join(e.owner, sub),
			setup:    e.mountSSHFS,
			teardown: func() error { return e.sshfs.unmount() },
		})
	}
	return append(ts, &wtarget{
		name: tNative, dir: filepath.Join(e.native, sub), ownerDir: filepath.Join(e.native, sub),
		setup:    func(context.Context) error { return nil },
		teardown: func() error { return nil },
	})
}

// stats returns the peerfs mount's counters; on error, nil and a note: they explain the
// figures, they are not the measurement.
func (e *workEnv) stats() *opCounts {
	st, err := e.peers.stats(e.mnt)
	if err != nil {
		e.note("peerfs stats failed: %v", err)
		return nil
	}
	c := &opCounts{calls: map[string]int64{}, bytes: map[string]int64{}}
	for _, o := range st.Ops {
		c.calls[o.Name], c.bytes[o.Name] = o.Calls, o.Bytes
	}
	for k, v := range st.Counters {
		c.calls[k] = v
	}
	return c
}

// opCounts is a snapshot of "peerfs stats": calls and bytes per FUSE operation (lookup, read,
// write...) and the mount's counters (passthrough_opens, round_trips...) as calls.
type opCounts struct {
	calls, bytes map[string]int64
}

// since returns the calls and bytes of op between an earlier snapshot and this one; zero
// when either is missing.
func (c *opCounts) since(before *opCounts, op string) (calls, bytes int64) {
	if c == nil || before == nil {
		return 0, 0
	}
	return c.calls[op] - before.calls[op], c.bytes[op] - before.bytes[op]
}

// The child process. "peerfs-bench workload-child JOB" runs one job, given as JSON, and
// prints its result as JSON. It is dispatched from init, before main parses flags, because
// it is no suite of its own.
//
// Why a child (see also createFiles in mount.go): the Go runtime preempts goroutines with
// SIGURG, and a signal that arrives while a system call waits on a FUSE request makes the
// kernel send FUSE_INTERRUPT, which turns some calls into EINTR; and this process's own
// goroutines (stats, timers) would share the two cores with the loop. The child runs with
// GODEBUG=asyncpreemptoff=1, makes its system calls through x/sys/unix without Go's file
// wrappers (no poller registration, no finalizers), and times only its loop.
const childVerb = "workload-child"

// job is one timed loop. Which fields count depends on Op; paths are absolute, or relative
// to Dir, which the child changes into first (a deep stat then walks only its own path).
type job struct {
	Op     string `json:"op"`
	Dir    string `json:"dir,omitempty"`
	Path   string `json:"path,omitempty"`
	N      int    `json:"n,omitempty"`      // operations, or files
	Files  int    `json:"files,omitempty"`  // distinct files an op cycles over
	Size   int64  `json:"size,omitempty"`   // bytes per file
	Buf    int    `json:"buf,omitempty"`    // bytes per read or write call
	Random bool   `json:"random,omitempty"` // reads at a seeded permutation of Buf-sized offsets
	Cap    int64  `json:"cap,omitempty"`    // at most this many bytes for a random read
	Drop   bool   `json:"drop,omitempty"`   // evict the file's pages (fadvise) before the loop
	Warm   bool   `json:"warm,omitempty"`   // one untimed pass before the timed one
	Seed   uint64 `json:"seed,omitempty"`
	Name   string `json:"name,omitempty"` // an extended attribute's name
}

// jobResult is what the child measured.
type jobResult struct {
	Seconds float64 `json:"seconds"`
	Calls   int64   `json:"calls"` // the loop's system calls of interest (reads, writes, creates...)
	Bytes   int64   `json:"bytes,omitempty"`
	Files   int64   `json:"files,omitempty"`
	// Unsupported: the filesystem serves no extended attributes (EOPNOTSUPP), so the kernel
	// answered the calls without asking it.
	Unsupported bool `json:"unsupported,omitempty"`
}

// jobs are the child's loops by Op. They live in the suites' files; this is a variable, not
// filled by init functions, so that the table is complete when the child's init runs.
var jobs = map[string]func(job) (jobResult, error){
	"read":         readJob,
	"write":        writeJob,
	"create":       createJob,
	"delete":       deleteJob,
	"open":         openJob,
	"stat":         statJob,
	"getxattr":     getxattrJob,
	"tree-create":  treeCreateJob,
	"tree-compile": treeCompileJob,
	"tree-read":    treeReadJob,
	"tree-delete":  treeDeleteJob,
	"tree-stat":    treeStatJob,
	"tree-rmrf":    treeRmrfJob,
	"many-create":  manyCreateJob,
	"many-list":    manyListJob,
	"many-lsl":     manyLongListJob,
	"many-read":    manyReadJob,
	"many-delete":  manyDeleteJob,
}

func init() {
	if len(os.Args) == 3 && os.Args[1] == childVerb {
		os.Exit(childMain(os.Args[2]))
	}
}

func childMain(arg string) int {
	var j job
	if err := json.Unmarshal([]byte(arg), &j); err != nil {
		fmt.Fprintln(os.Stderr, "bad job:", err)
		return 2
	}
	run := jobs[j.Op]
	if run == nil {
		fmt.Fprintf(os.Stderr, "unknown job %q\n", j.Op)
		return 2
	}
	if j.Dir != "" {
		if err := unix.Chdir(j.Dir); err != nil {
			fmt.Fprintf(os.Stderr, "chdir %s: %v\n", j.Dir, err)
			return 1
		}
	}
	res, err := run(j)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	return 0
}

// runJob runs j in a child process and returns what it measured.
func runJob(ctx context.Context, j job) (jobResult, error) {
	self, err := os.Executable()
	if err != nil {
		return jobResult{}, err
	}
	arg, _ := json.Marshal(j)
	cmd := exec.CommandContext(ctx, self, childVerb, string(arg))
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return jobResult{}, fmt.Errorf("%s %s: %v: %s", j.Op, firstNonEmpty(j.Path, j.Dir), err, strings.TrimSpace(stderr.String()))
	}
	var res jobResult
	if err := json.Unmarshal(out, &res); err != nil {
		return res, fmt.Errorf("%s: result %q: %w", j.Op, out, err)
	}
	if res.Seconds <= 0 {
		return res, fmt.Errorf("%s %s: no time measured", j.Op, firstNonEmpty(j.Path, j.Dir))
	}
	return res, nil
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// timed runs f and returns its wall time in seconds.
func timed(f func() error) (float64, error) {
	t0 := time.Now()
	err := f()
	return time.Since(t0).Seconds(), err
}

// figure holds every sample of one figure: one row of a table on one target, one value per
// run in run order. Extra keeps, per name, figures measured alongside (FUSE calls, average
// request sizes, µs per call), one per run as well.
type figure struct {
	Row    string               `json:"row"`
	Target string               `json:"target"`
	Unit   string               `json:"unit"`
	Values []float64            `json:"values"`
	Extra  map[string][]float64 `json:"extra,omitempty"`
}

// figures is a suite's raw data (Section.Raw): its parameters and every sample.
type figures struct {
	Params  map[string]any `json:"params"`
	Figures []*figure      `json:"figures"`
}

func (fs *figures) get(row, target string) *figure {
	for _, f := range fs.Figures {
		if f.Row == row && f.Target == target {
			return f
		}
	}
	return nil
}

// add appends one sample, with its extra figures, to a row and target.
func (fs *figures) add(row, target, unit string, v float64, extra map[string]float64) {
	f := fs.get(row, target)
	if f == nil {
		f = &figure{Row: row, Target: target, Unit: unit}
		fs.Figures = append(fs.Figures, f)
	}
	f.Values = append(f.Values, v)
	if len(extra) > 0 && f.Extra == nil {
		f.Extra = map[string][]float64{}
	}
	for k, x := range extra {
		f.Extra[k] = append(f.Extra[k], x)
	}
}

// med returns the median, min and max of a figure; ok is false when there is none.
func (fs *figures) med(row, target string) (m, lo, hi float64, ok bool) {
	f := fs.get(row, target)
	if f == nil || len(f.Values) == 0 {
		return 0, 0, 0, false
	}
	m, lo, hi = median(f.Values)
	return m, lo, hi, true
}

// extra returns the median of an extra figure; ok is false when there is none.
func (fs *figures) extra(row, target, name string) (float64, bool) {
	f := fs.get(row, target)
	if f == nil || len(f.Extra[name]) == 0 {
		return 0, false
	}
	m, _, _ := median(f.Extra[name])
	return m, true
}

// cell is "median (min-max)" with the given number of decimals, or "median" for one run,
// or "-" when there is no sample.
func (fs *figures) cell(row, target string, decimals int) string {
	m, lo, hi, ok := fs.med(row, target)
	if !ok {
		return "-"
	}
	f := fs.get(row, target)
	if len(f.Values) == 1 {
		return num(m, decimals)
	}
	return fmt.Sprintf("%s (%s-%s)", num(m, decimals), num(lo, decimals), num(hi, decimals))
}

// num formats x with the given decimals; with -1, with as many as its size calls for.
func num(x float64, decimals int) string {
	if decimals < 0 {
		switch {
		case x >= 100:
			decimals = 0
		case x >= 10:
			decimals = 1
		default:
			decimals = 2
		}
	}
	return fmt.Sprintf("%.*f", decimals, x)
}

// ratio formats a/b, or "-" when either is missing.
func ratio(a, b float64, okA, okB bool) string {
	if !okA || !okB || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// versus compares peerfs with sshfs over rows whose figures are times (lower is better),
// counting a difference under 5% as even.
func versus(fs *figures, rows []string, what string) string {
	var faster, slower, even []string
	for _, row := range rows {
		p, _, _, ok1 := fs.med(row, tPeerfs)
		s, _, _, ok2 := fs.med(row, tSSHFS)
		switch {
		case !ok1 || !ok2 || p <= 0 || s <= 0:
		case s/p >= 1.05:
			faster = append(faster, fmt.Sprintf("%s %.1fx", row, s/p))
		case p/s >= 1.05:
			slower = append(slower, fmt.Sprintf("%s %.1fx", row, p/s))
		default:
			even = append(even, row)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "- **peerfs against sshfs:** faster on %d of %d %s", len(faster), len(faster)+len(slower)+len(even), what)
	if len(faster) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(faster, ", "))
	}
	if len(slower) > 0 {
		fmt.Fprintf(&b, "; slower on %s", strings.Join(slower, ", "))
	}
	if len(even) > 0 {
		fmt.Fprintf(&b, "; even (within 5%%) on %s", strings.Join(even, ", "))
	}
	b.WriteString(".\n")
	return b.String()
}

// table renders a Markdown table.
func table(header []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n|")
	for range header {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

// sizeName writes a byte count the way the tables do: 4K, 128K, 1M, 16M, 1G.
func sizeName(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprint(n)
}

// parseSizes parses a comma-separated list of sizes ("4K,128K,1M").
func parseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := parseSize(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad size %q in %q", f, s)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no sizes in %q", s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// dropTree evicts the page cache of every file under dir (fadvise, after a sync so no page is
// dirty), so the next reads come from the disk. It needs no privilege and leaves the rest of
// a shared machine's cache alone.
func dropTree(dir string) error {
	unix.Sync()
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOATIME, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
	})
}

// plural writes "1 run", "3 runs".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// progress prints one line of progress on stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}
