package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peerfs/peerfs/internal/fusefs"
	"github.com/peerfs/peerfs/internal/wire"
)

// The tune benchmark: where the defaults of "peerfs mount"'s tuning flags come from. Each
// flag is swept alone, the others at their defaults, on the workload it acts on, through a
// mount that a freshly started beta daemon (empty chunk cache) makes with that flag:
//
//	--readahead, --kernel-readahead  a cold sequential read of big.bin (--size; the owner's
//	                                 page cache for it dropped), 1 MiB reads;
//	--reads-in-flight                cold random reads: --readers processes, each pread-ing
//	                                 128 KiB at its share of a seeded permutation of big.bin's
//	                                 128 KiB blocks, --random-total bytes in all;
//	--writes-in-flight               cp of local/src.bin (in the page cache) into the mount,
//	                                 timed to cp's exit, so including close;
//	--piece                          the random reads, then the cp, on the same mount;
//	--inline                         two cold walks of a tree of --tree-files small files,
//	                                 the owner's page cache for the tree dropped, each on a
//	                                 mount of its own: one lists every folder and reads every
//	                                 file whole (find and cat), the other lists every folder
//	                                 and lstats every entry but reads nothing (find -ls, ls
//	                                 -lR, git status). Inlining speeds up the first and makes
//	                                 the second fetch contents it never reads, so the default
//	                                 is weighed on both (see tuneKnob.joint).
//
// The native references do the same on the owner's disk, cold. Each run measures every value
// of every flag, in an order that rotates from run to run. "peerfs stats" before and after
// each workload gives the FUSE calls and the requests to the owner behind the figure.
//
// The random readers and the tree walks run in child processes of their own ("tune-child",
// dispatched from init as workloads.go does for its jobs); the readers wait for a common
// start time, so that the clock covers all of them and none of their start-up.

type tuneOptions struct {
	commonOptions
	readers     int
	randomTotal int64
	treeFiles   int
	seed        uint64
	knobs       []string // flags swept, in the tables' order
}

const (
	defaultTuneSize        = "512MiB"
	defaultTuneReaders     = 8
	defaultTuneRandomTotal = 256 << 20
	quickTuneRandomTotal   = 8 << 20
	defaultTuneTreeFiles   = 3000
	quickTuneTreeFiles     = 200
	tuneRandomBuf          = 128 << 10
	// tuneStartLead is how far ahead the random readers' common start is set: time for
	// --readers Go processes to start on two busy cores.
	tuneStartLead = 500 * time.Millisecond
)

// Workloads of the tune benchmark: the second half of a figure's row.
const (
	wSeq    = "cold sequential read"
	wRandom = "cold random reads"
	wWrite  = "cp into the mount"
	wTree   = "cold find + cat"
	wList   = "cold find -ls"
)

// tuneWorks are all the workloads, in the order the native references are measured and listed.
var tuneWorks = []string{wSeq, wRandom, wWrite, wTree, wList}

// tuneKnob is one flag of "peerfs mount" and the values it is swept over.
type tuneKnob struct {
	flag   string
	what   string
	values []int64
	def    int64
	bytes  bool     // values are bytes (4K, 1M), not counts
	work   []string // the workloads it is measured on, in the table's column order
	// apart gives each workload a fresh daemon and mount of its own: they walk the same
	// files, and the first would leave the second a warm replica and chunk cache.
	apart bool
	// joint says the knob has one default for all its workloads, all timed in seconds: when
	// their own picks disagree, it is the value whose medians add up to the least time (a
	// user who does each once waits the sum), or the default while its sum lies within that
	// value's summed min-max.
	joint bool
}

func tuneKnobs() []*tuneKnob {
	return []*tuneKnob{
		{flag: "readahead", what: "how far a sequential reader's stream runs ahead of it", bytes: true,
			values: []int64{2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20}, def: fusefs.DefaultReadahead, work: []string{wSeq}},
		{flag: "kernel-readahead", what: "the kernel's readahead window on the mount", bytes: true,
			values: []int64{128 << 10, 1 << 20, 4 << 20, 16 << 20}, def: fusefs.DefaultKernelReadahead, work: []string{wSeq}},
		{flag: "reads-in-flight", what: "READs in flight for random reads",
			values: []int64{4, 8, 16, 32, 64}, def: fusefs.DefaultReadsInFlight, work: []string{wRandom}},
		{flag: "writes-in-flight", what: "WRITEs in flight when written data is sent",
			values: []int64{1, 2, 4, 8, 16, 32}, def: fusefs.DefaultWritesInFlight, work: []string{wWrite}},
		{flag: "piece", what: "bytes per WRITE request, and per READ rounded up to whole 256 KiB cache chunks", bytes: true,
			values: []int64{128 << 10, 256 << 10, 512 << 10, 1 << 20}, def: fusefs.DefaultPiece, work: []string{wRandom, wWrite}},
		{flag: "inline", what: "files up to this size come inline in directory listings", bytes: true,
			values: []int64{0, 1 << 10, 4 << 10, 16 << 10, wire.MaxInline}, def: fusefs.DefaultInline,
			work: []string{wTree, wList}, apart: true, joint: true},
	}
}

// arg is the flag's argument for a value. "--inline 0" means the default, so no inlining is
// asked for as --inline 1: no file of the tree is that small.
func (k *tuneKnob) arg(v int64) string {
	if k.flag == "inline" && v == 0 {
		return "1"
	}
	return strconv.FormatInt(v, 10)
}

func (k *tuneKnob) name(v int64) string {
	if k.bytes && v > 0 {
		return sizeName(v)
	}
	return strconv.FormatInt(v, 10)
}

func tuneRow(flag, work string) string { return flag + ": " + work }

// lowerBetter is true for workloads timed in seconds; the others are MiB/s.
func lowerBetter(work string) bool { return work == wTree || work == wList }

func tuneUnit(work string) string {
	if lowerBetter(work) {
		return "s"
	}
	return "MiB/s"
}

func init() {
	if len(os.Args) == 3 && os.Args[1] == tuneChildVerb {
		os.Exit(tuneChildMain(os.Args[2]))
	}
	var to tuneOptions
	var randomTotal, knobs string
	var all []string
	for _, k := range tuneKnobs() {
		all = append(all, k.flag)
	}
	register(&suite{
		name: "tune",
		usage: "[--size " + defaultTuneSize + "] [--runs 3] [--readers 8] [--random-total 256MiB] [--tree-files 3000] " +
			"[--knobs " + strings.Join(all, ",") + "]",
		flags: func(fs *flag.FlagSet) {
			// 512 MiB rather than the common 1 GiB: 32 of the default readahead windows,
			// and a full run stays within about ten minutes on two cores.
			if f := fs.Lookup("size"); f != nil {
				f.Value.Set(defaultTuneSize)
				f.DefValue = defaultTuneSize
			}
			fs.IntVar(&to.readers, "readers", defaultTuneReaders, "concurrent reader processes of the random reads")
			fs.StringVar(&randomTotal, "random-total", fmt.Sprint(defaultTuneRandomTotal), "bytes the random readers read in all, per run")
			fs.IntVar(&to.treeFiles, "tree-files", defaultTuneTreeFiles, "small files in the tree of the --inline sweep's walks")
			fs.Uint64Var(&to.seed, "seed", 1, "seed of the random offsets and of the tree")
			fs.StringVar(&knobs, "knobs", strings.Join(all, ","), "the flags to sweep, comma-separated")
		},
		quick: func(set map[string]bool) {
			if !set["random-total"] {
				randomTotal = fmt.Sprint(quickTuneRandomTotal)
			}
			if !set["tree-files"] {
				to.treeFiles = quickTuneTreeFiles
			}
		},
		run: func(ctx context.Context, o commonOptions) (*Section, error) {
			to.commonOptions = o
			var err error
			if to.randomTotal, err = parseSize(randomTotal); err != nil || to.randomTotal <= 0 {
				return nil, fmt.Errorf("bad --random-total %q", randomTotal)
			}
			if to.readers < 1 || to.treeFiles < 10 {
				return nil, fmt.Errorf("--readers must be positive and --tree-files at least 10")
			}
			for _, k := range strings.Split(knobs, ",") {
				if k = strings.TrimSpace(k); k == "" {
					continue
				}
				if !slices.Contains(all, k) {
					return nil, fmt.Errorf("--knobs: unknown flag %q (known: %s)", k, strings.Join(all, ", "))
				}
				to.knobs = append(to.knobs, k)
			}
			if len(to.knobs) == 0 {
				return nil, fmt.Errorf("--knobs: no flag to sweep")
			}
			return runTune(ctx, to)
		},
	})
}

type tuneBench struct {
	o        tuneOptions
	failures []tuneFailure
	e        *workEnv
	knobs    []*tuneKnob
	figs     *figures
	big      string // owner/big.bin
	src      string // local/src.bin
	tree     treeShape
}

func runTune(ctx context.Context, o tuneOptions) (*Section, error) {
	b := &tuneBench{o: o}
	for _, k := range tuneKnobs() {
		if !slices.Contains(o.knobs, k.flag) {
			continue
		}
		if o.Quick {
			// Two values check the harness: the smallest and the default.
			k.values = []int64{k.values[0], k.def}
		}
		b.knobs = append(b.knobs, k)
	}
	// Every 128 KiB block of the file at most once across the readers.
	if blocks := o.Size / tuneRandomBuf; o.randomTotal/tuneRandomBuf > blocks {
		b.o.randomTotal = blocks * tuneRandomBuf
	}
	e, err := newWorkEnv(o.commonOptions, "tune")
	if err != nil {
		return nil, err
	}
	defer e.close()
	b.e = e
	b.big = filepath.Join(e.owner, "big.bin")
	b.src = filepath.Join(e.local, "src.bin")
	b.tree = tuneTree(o.treeFiles, o.seed)
	progress("writing two %d MiB test files and a tree of %d files (%d KiB)...", o.Size>>20,
		len(b.tree.files), b.tree.bytes>>10)
	if err := writeRandom(b.big, o.Size); err != nil {
		return nil, err
	}
	if err := writeRandom(b.src, o.Size); err != nil {
		return nil, err
	}
	if err := writeTuneTree(filepath.Join(e.owner, "tree"), b.tree); err != nil {
		return nil, err
	}
	if err := e.start(ctx, false); err != nil {
		return nil, err
	}
	b.figs = &figures{Params: map[string]any{
		"size": o.Size, "runs": o.Runs, "readers": o.readers, "random_total": b.o.randomTotal,
		"random_buf": tuneRandomBuf, "tree_files": len(b.tree.files), "tree_bytes": b.tree.bytes,
		"seed": o.seed, "cp": cpVersion(),
	}}
	t0 := time.Now()
	for run := 0; run < o.Runs; run++ {
		if err := b.native(ctx, run); err != nil {
			return nil, fmt.Errorf("run %d, native: %w", run+1, err)
		}
		for _, k := range b.knobs {
			for j := range k.values {
				v := k.values[(run+j)%len(k.values)]
				if err := b.measure(ctx, k, v, run); err != nil {
					return nil, fmt.Errorf("run %d, --%s %s: %w", run+1, k.flag, k.name(v), err)
				}
			}
		}
	}
	b.figs.Params["seconds"] = time.Since(t0).Seconds()
	if len(b.failures) > 0 {
		b.figs.Params["failures"] = b.failures
	}
	sec := b.section()
	fmt.Println()
	fmt.Println(sec.Markdown)
	return sec, nil
}

// tuneTree is the tree of the --inline sweep: the folders and names of tree.go's kernel-shaped
// tree, with sizes log-normal around a median of 3 KiB (sigma 1.2, clipped to 64 B..100 KiB):
// about 59% of the files are 4 KiB or less, 92% 16 KiB or less, 99.5% 64 KiB or less, so each
// --inline value takes in a different share of them.
func tuneTree(n int, seed uint64) treeShape {
	t := kernelTree(n, seed)
	r := rand.New(rand.NewPCG(seed, 0x74756e652d74))
	t.bytes = 0
	for i := range t.files {
		s := int64(3072 * math.Exp(1.2*r.NormFloat64()))
		t.files[i].size = min(max(s, 64), 100<<10)
		t.bytes += t.files[i].size
	}
	return t
}

func writeTuneTree(root string, t treeShape) error {
	os.RemoveAll(root)
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	for _, d := range t.dirs {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	_, err := writeTreeFiles(root, t.files, treeText())
	return err
}

// native measures the references on the owner's disk, each cold.
func (b *tuneBench) native(ctx context.Context, run int) error {
	works := map[string]bool{}
	for _, k := range b.knobs {
		for _, w := range k.work {
			works[w] = true
		}
	}
	for _, w := range tuneWorks {
		if !works[w] {
			continue
		}
		var err error
		switch w {
		case wSeq:
			err = b.seqRead(ctx, tuneRow(tNative, w), tNative, b.big, false)
		case wRandom:
			err = b.randomRead(ctx, tuneRow(tNative, w), tNative, b.big, false)
		case wWrite:
			err = b.write(ctx, tuneRow(tNative, w), tNative, filepath.Join(b.e.native, "in.bin"), false)
		case wTree, wList:
			err = b.walk(ctx, tuneRow(tNative, w), tNative, w, filepath.Join(b.e.owner, "tree"), false)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
		b.report(run, tuneRow(tNative, w), tNative, w)
	}
	return nil
}

// measure runs the workloads of one flag value through a mount made with it by a fresh
// daemon; one mount for them all, or one each when the knob keeps them apart.
func (b *tuneBench) measure(ctx context.Context, k *tuneKnob, v int64, run int) error {
	if !k.apart {
		return b.measureOn(ctx, k, v, run, k.work)
	}
	for _, w := range k.work {
		if err := b.measureOn(ctx, k, v, run, []string{w}); err != nil {
			return err
		}
	}
	return nil
}

func (b *tuneBench) measureOn(ctx context.Context, k *tuneKnob, v int64, run int, works []string) error {
	e := b.e
	defer func() {
		e.peers.unmount(e.mnt)
		os.Remove(filepath.Join(e.owner, "in.bin"))
		unix.Sync()
	}()
	if err := e.mountPeerfs(ctx, true, "--"+k.flag, k.arg(v)); err != nil {
		return err
	}
	name := k.name(v)
	for _, w := range works {
		row := tuneRow(k.flag, w)
		var err error
		switch w {
		case wSeq:
			err = b.seqRead(ctx, row, name, filepath.Join(e.mnt, "big.bin"), true)
		case wRandom:
			err = b.randomRead(ctx, row, name, filepath.Join(e.mnt, "big.bin"), true)
		case wWrite:
			err = b.write(ctx, row, name, filepath.Join(e.mnt, "in.bin"), true)
		case wTree, wList:
			err = b.walk(ctx, row, name, w, filepath.Join(e.mnt, "tree"), true)
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			// A value that fails is a finding, not the end of the sweep: it is recorded with
			// the daemon's last warning, and the other values and workloads still run.
			b.fail(run, row, name, err)
			continue
		}
		b.report(run, row, name, w)
	}
	return nil
}

// tuneFailure is a workload that failed through the mount made with one flag value.
type tuneFailure struct {
	Row    string `json:"row"`
	Target string `json:"target"`
	Run    int    `json:"run"`
	Error  string `json:"error"`
	Log    string `json:"log,omitempty"` // beta's last warning before it
}

func (b *tuneBench) fail(run int, row, target string, err error) {
	f := tuneFailure{Row: row, Target: target, Run: run + 1, Error: err.Error(), Log: lastWarning(b.e.peers.homeB + ".log")}
	b.failures = append(b.failures, f)
	progress("run %d %-40s %-6s FAILED: %v", run+1, row, target, err)
}

// lastWarning returns the message and error of the last WARN or ERROR line of a daemon log.
func lastWarning(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if !strings.Contains(l, "level=WARN") && !strings.Contains(l, "level=ERROR") {
			continue
		}
		var keep []string
		for _, key := range []string{"msg=", "err="} {
			if j := strings.Index(l, key); j >= 0 {
				keep = append(keep, l[j:])
			}
		}
		if len(keep) == 0 {
			return l
		}
		// msg=... runs up to the next key; the err is the line's end.
		msg := keep[0]
		if k := strings.Index(msg, " mount="); k >= 0 {
			msg = msg[:k]
		}
		if len(keep) > 1 {
			return msg + " " + keep[1]
		}
		return msg
	}
	return ""
}

func (b *tuneBench) report(run int, row, target, work string) {
	f := b.figs.get(row, target)
	progress("run %d %-40s %-6s %8.2f %s", run+1, row, target, f.Values[len(f.Values)-1], f.Unit)
}

func (b *tuneBench) drop(path string) error {
	note, err := dropFileCache(path)
	if note != "" {
		b.e.note("%s", note)
	}
	return err
}

// counters snapshots the mount's stats when the workload goes through it.
func (b *tuneBench) counters(mounted bool) *opCounts {
	if !mounted {
		return nil
	}
	return b.e.stats()
}

func (b *tuneBench) seqRead(ctx context.Context, row, target, path string, mounted bool) error {
	if err := b.drop(b.big); err != nil {
		return err
	}
	extra := map[string]float64{}
	if mounted {
		kb, err := readaheadKB(b.e.mnt)
		if err != nil {
			b.e.note("read_ahead_kb of the mount not read: %v", err)
		}
		extra["read_ahead_kb"] = float64(kb)
	}
	s0 := b.counters(mounted)
	cpu0 := b.e.peers.cpu()
	res, err := runJob(ctx, job{Op: "read", Path: path, Buf: 1 << 20})
	if err != nil {
		return err
	}
	if s0 != nil {
		s1 := b.e.stats()
		calls, bytes := s1.since(s0, "read")
		owner, _ := s1.since(s0, "owner_read")
		streams, _ := s1.since(s0, "streams")
		waits, _ := s1.since(s0, "stream_waits")
		extra["fuse_reads"], extra["fuse_read_avg"] = float64(calls), avg(bytes, calls)
		extra["owner_reads"], extra["streams"], extra["stream_waits"] = float64(owner), float64(streams), float64(waits)
		extra["cpu_seconds"] = b.e.peers.cpu() - cpu0
	}
	b.figs.add(row, target, "MiB/s", mibs(res.Bytes, res.Seconds), extra)
	return nil
}

func (b *tuneBench) randomRead(ctx context.Context, row, target, path string, mounted bool) error {
	if err := b.drop(b.big); err != nil {
		return err
	}
	s0 := b.counters(mounted)
	bytes, secs, err := b.readers(ctx, path)
	if err != nil {
		return err
	}
	extra := map[string]float64{"seconds": secs}
	if s0 != nil {
		s1 := b.e.stats()
		calls, _ := s1.since(s0, "read")
		owner, ob := s1.since(s0, "owner_read")
		rt, _ := s1.since(s0, "round_trips")
		extra["fuse_reads"], extra["owner_reads"], extra["owner_read_avg"] = float64(calls), float64(owner), avg(ob, owner)
		extra["round_trips"] = float64(rt)
	}
	b.figs.add(row, target, "MiB/s", mibs(bytes, secs), extra)
	return nil
}

// readers runs the random readers on path and returns the bytes they read and the seconds
// from their common start to the last one's end.
func (b *tuneBench) readers(ctx context.Context, path string) (int64, float64, error) {
	start := time.Now().Add(tuneStartLead).UnixNano()
	per := b.o.randomTotal / tuneRandomBuf / int64(b.o.readers)
	if per < 1 {
		per = 1
	}
	type out struct {
		res tuneResult
		err error
	}
	done := make(chan out, b.o.readers)
	for i := 0; i < b.o.readers; i++ {
		j := tuneJob{Op: "random", Path: path, Buf: tuneRandomBuf, Reader: i, Readers: b.o.readers, N: per,
			Seed: b.o.seed, Start: start}
		go func() {
			r, err := runTuneJob(ctx, j)
			done <- out{r, err}
		}()
	}
	var bytes, end int64
	var firstErr error
	late := 0
	for i := 0; i < b.o.readers; i++ {
		o := <-done
		if o.err != nil {
			firstErr = cmpErr(firstErr, o.err)
			continue
		}
		bytes += o.res.Bytes
		end = max(end, o.res.End)
		if o.res.Late {
			late++
		}
	}
	if firstErr != nil {
		return 0, 0, firstErr
	}
	if late > 0 {
		b.e.note("%d random readers started after their common start time (%v after launch): the figure includes their start-up", late, tuneStartLead)
	}
	return bytes, float64(end-start) / 1e9, nil
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// write copies local/src.bin (read once first, so it comes from the page cache) to dst with
// cp; on the mount, the owner must then have every byte (close-to-open).
func (b *tuneBench) write(ctx context.Context, row, target, dst string, mounted bool) error {
	defer os.Remove(filepath.Join(b.e.native, "in.bin"))
	if _, err := runJob(ctx, job{Op: "read", Path: b.src, Buf: 1 << 20}); err != nil {
		return err
	}
	unix.Sync()
	s0 := b.counters(mounted)
	secs, err := timed(func() error {
		if out, err := exec.CommandContext(ctx, "cp", b.src, dst).CombinedOutput(); err != nil {
			return fmt.Errorf("cp %s %s: %v %s", b.src, dst, err, strings.TrimSpace(string(out)))
		}
		return nil
	})
	if err != nil {
		return err
	}
	extra := map[string]float64{"seconds": secs}
	if s0 != nil {
		s1 := b.e.stats()
		if fi, err := os.Stat(filepath.Join(b.e.owner, "in.bin")); err != nil || fi.Size() != b.o.Size {
			return fmt.Errorf("after cp into the mount the owner's copy is not %d bytes: %v", b.o.Size, err)
		}
		calls, bytes := s1.since(s0, "write")
		owner, ob := s1.since(s0, "owner_write")
		extra["fuse_writes"], extra["fuse_write_avg"] = float64(calls), avg(bytes, calls)
		extra["owner_writes"], extra["owner_write_avg"] = float64(owner), avg(ob, owner)
	}
	b.figs.add(row, target, "MiB/s", mibs(b.o.Size, secs), extra)
	return nil
}

// walk runs one of the tree's walks (wTree or wList) on dir, the owner's page cache for the
// tree dropped first. Through the mount it adds the round trips, the FUSE READs and the bytes
// beta received from alpha over the link: listings, inlined contents and READ replies.
func (b *tuneBench) walk(ctx context.Context, row, target, work, dir string, mounted bool) error {
	op := map[string]string{wTree: "tree", wList: "list"}[work]
	if err := dropTree(filepath.Join(b.e.owner, "tree")); err != nil {
		return err
	}
	s0 := b.counters(mounted)
	in0, inOK := b.linkIn(mounted)
	res, err := runTuneJob(ctx, tuneJob{Op: op, Path: dir, N: b.tree.bytes})
	if err != nil {
		return err
	}
	if res.Files != int64(len(b.tree.files)) {
		return fmt.Errorf("%s: %d files under %s, want %d", op, res.Files, dir, len(b.tree.files))
	}
	extra := map[string]float64{"files": float64(res.Files), "bytes": float64(res.Bytes)}
	if s0 != nil {
		s1 := b.e.stats()
		rt, _ := s1.since(s0, "round_trips")
		reads, _ := s1.since(s0, "read")
		owner, _ := s1.since(s0, "owner_read")
		extra["round_trips"], extra["fuse_reads"], extra["owner_reads"] = float64(rt), float64(reads), float64(owner)
	}
	if in1, ok := b.linkIn(mounted); ok && inOK {
		extra["link_bytes_in"] = float64(in1 - in0)
	}
	b.figs.add(row, target, "s", res.Seconds, extra)
	return nil
}

// linkIn returns the bytes beta has received from alpha over their link ("peerfs status"):
// "peerfs stats" counts no bytes for listings, and the contents they inline are what --inline
// trades. Like the stats, on error only a note.
func (b *tuneBench) linkIn(mounted bool) (int64, bool) {
	if !mounted {
		return 0, false
	}
	n, err := b.e.peers.bytesIn("alpha")
	if err != nil {
		b.e.note("bytes from alpha not read: %v", err)
		return 0, false
	}
	return n, true
}

// readaheadKB returns the kernel's readahead window of the filesystem mounted at dir, from
// its backing device info in sysfs, as the daemon set it.
func readaheadKB(dir string) (int64, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, err
	}
	b, err := os.ReadFile(fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev)))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// The child process of the tune benchmark: "peerfs-bench tune-child JOB". Like
// workloads.go's child it runs with GODEBUG=asyncpreemptoff=1 and makes its system calls
// through x/sys/unix.
const tuneChildVerb = "tune-child"

// tuneJob is one child's work.
//
//	random: pread N blocks of Buf bytes of Path: blocks Reader, Reader+Readers, ... of a
//	        permutation of the file's blocks seeded with Seed, so the readers share no block;
//	        the loop waits for Start (Unix nanoseconds) and the result gives its End.
//	tree:   list every folder under Path and read every file whole with 128 KiB reads (find
//	        and cat); the bytes read must come to N.
//	list:   list every folder under Path and lstat every entry, opening no file (find -ls);
//	        the regular files' sizes must come to N.
type tuneJob struct {
	Op      string `json:"op"`
	Path    string `json:"path"`
	Buf     int    `json:"buf,omitempty"`
	N       int64  `json:"n,omitempty"`
	Reader  int    `json:"reader,omitempty"`
	Readers int    `json:"readers,omitempty"`
	Seed    uint64 `json:"seed,omitempty"`
	Start   int64  `json:"start,omitempty"`
}

type tuneResult struct {
	Seconds float64 `json:"seconds"`
	End     int64   `json:"end,omitempty"`  // Unix nanoseconds
	Late    bool    `json:"late,omitempty"` // the loop began after Start
	Bytes   int64   `json:"bytes"`
	Files   int64   `json:"files,omitempty"`
}

func tuneChildMain(arg string) int {
	var j tuneJob
	if err := json.Unmarshal([]byte(arg), &j); err != nil {
		fmt.Fprintln(os.Stderr, "bad job:", err)
		return 2
	}
	var res tuneResult
	var err error
	switch j.Op {
	case "random":
		res, err = tuneRandomJob(j)
	case "tree":
		res, err = tuneTreeJob(j)
	case "list":
		res, err = tuneListJob(j)
	default:
		err = fmt.Errorf("unknown job %q", j.Op)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	return 0
}

func runTuneJob(ctx context.Context, j tuneJob) (tuneResult, error) {
	self, err := os.Executable()
	if err != nil {
		return tuneResult{}, err
	}
	arg, _ := json.Marshal(j)
	cmd := exec.CommandContext(ctx, self, tuneChildVerb, string(arg))
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return tuneResult{}, fmt.Errorf("%s %s: %v: %s", j.Op, j.Path, err, strings.TrimSpace(stderr.String()))
	}
	var res tuneResult
	if err := json.Unmarshal(out, &res); err != nil {
		return res, fmt.Errorf("%s: result %q: %w", j.Op, out, err)
	}
	if res.Seconds <= 0 || res.Bytes <= 0 {
		return res, fmt.Errorf("%s %s: nothing measured (%s)", j.Op, j.Path, out)
	}
	return res, nil
}

func tuneRandomJob(j tuneJob) (tuneResult, error) {
	fd, err := unix.Open(j.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return tuneResult{}, fmt.Errorf("open %s: %w", j.Path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return tuneResult{}, err
	}
	perm := randomOffsets(st.Size, int64(j.Buf), 0, j.Seed)
	var offs []int64
	for i := j.Reader; i < len(perm) && int64(len(offs)) < j.N; i += j.Readers {
		offs = append(offs, perm[i])
	}
	buf := make([]byte, j.Buf)
	for i := range buf { // fault the buffer in before the clock starts
		buf[i] = 1
	}
	var res tuneResult
	if wait := time.Until(time.Unix(0, j.Start)); wait > 0 {
		time.Sleep(wait)
	} else {
		res.Late = true
	}
	t0 := time.Now()
	for _, off := range offs {
		n, err := unix.Pread(fd, buf, off)
		if err != nil {
			return res, fmt.Errorf("pread %s at %d: %w", j.Path, off, err)
		}
		if n != min(j.Buf, int(st.Size-off)) {
			return res, fmt.Errorf("pread %s at %d: %d bytes", j.Path, off, n)
		}
		res.Bytes += int64(n)
	}
	end := time.Now()
	res.Seconds, res.End = end.Sub(t0).Seconds(), end.UnixNano()
	return res, nil
}

func tuneTreeJob(j tuneJob) (tuneResult, error) {
	buf := make([]byte, 128<<10)
	var jr jobResult
	t0 := time.Now()
	if err := readTree(j.Path, buf, &jr); err != nil {
		return tuneResult{}, err
	}
	res := tuneResult{Seconds: time.Since(t0).Seconds(), Bytes: jr.Bytes, Files: jr.Files}
	if jr.Bytes != j.N {
		return res, fmt.Errorf("read %d bytes in %d files under %s, want %d", jr.Bytes, jr.Files, j.Path, j.N)
	}
	return res, nil
}

func tuneListJob(j tuneJob) (tuneResult, error) {
	var res tuneResult
	t0 := time.Now()
	if err := listTree(j.Path, &res); err != nil {
		return tuneResult{}, err
	}
	res.Seconds = time.Since(t0).Seconds()
	if res.Bytes != j.N {
		return res, fmt.Errorf("listed %d bytes in %d files under %s, want %d", res.Bytes, res.Files, j.Path, j.N)
	}
	return res, nil
}

// listTree lists dir and lstats each entry, descending into folders, as find -ls does; it
// counts the regular files and adds up their sizes.
func listTree(dir string, res *tuneResult) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	for _, e := range ents {
		p := dir + "/" + e.Name()
		if err := unix.Lstat(p, &st); err != nil {
			return fmt.Errorf("lstat %s: %w", p, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if err := listTree(p, res); err != nil {
				return err
			}
		case unix.S_IFREG:
			res.Files++
			res.Bytes += st.Size
		}
	}
	return nil
}

// The section.

// tuneCol is a column of figures measured alongside a workload.
type tuneCol struct {
	head, key string
	kib       bool // bytes, shown in KiB: an average request size, or bytes moved
}

var tuneCols = map[string][]tuneCol{
	wSeq: {{"read_ahead_kb", "read_ahead_kb", false}, {"FUSE READs", "fuse_reads", false},
		{"avg READ", "fuse_read_avg", true}, {"stream waits", "stream_waits", false}},
	wRandom: {{"FUSE READs", "fuse_reads", false}, {"owner READs", "owner_reads", false},
		{"avg owner READ", "owner_read_avg", true}},
	wWrite: {{"FUSE WRITEs", "fuse_writes", false}, {"owner WRITEs", "owner_writes", false},
		{"avg owner WRITE", "owner_write_avg", true}},
	wTree: {{"round trips", "round_trips", false}, {"FUSE READs", "fuse_reads", false},
		{"from owner", "link_bytes_in", true}},
	wList: {{"round trips", "round_trips", false}, {"FUSE READs", "fuse_reads", false},
		{"from owner", "link_bytes_in", true}},
}

// bestOf returns the value of a knob with the best median on a workload.
func (b *tuneBench) bestOf(k *tuneKnob, work string) (int64, bool) {
	return b.bestAmong(k, work, k.values)
}

// bestAmong returns the value with the best median on a workload among some of a knob's.
func (b *tuneBench) bestAmong(k *tuneKnob, work string, values []int64) (int64, bool) {
	row := tuneRow(k.flag, work)
	var bv int64
	var bm float64
	found := false
	for _, v := range values {
		m, _, _, ok := b.figs.med(row, k.name(v))
		if !ok {
			continue
		}
		if !found || (lowerBetter(work) && m < bm) || (!lowerBetter(work) && m > bm) {
			bv, bm, found = v, m, true
		}
	}
	return bv, found
}

// speed turns a figure into "higher is better": MiB/s as they are, seconds inverted.
func speed(work string, x float64) float64 {
	if lowerBetter(work) {
		if x <= 0 {
			return 0
		}
		return 1 / x
	}
	return x
}

func (b *tuneBench) section() *Section {
	fs := b.figs
	o := b.o
	var md strings.Builder
	secs, _ := fs.Params["seconds"].(float64)
	fmt.Fprintf(&md, "Each tuning flag of `peerfs mount` is swept alone, the others at their defaults, on "+
		"the workload it acts on. For every value, beta's daemon is restarted with an empty chunk cache and "+
		"mounts alpha's share with that flag; the owner's page cache for what is read is dropped first. "+
		"Workloads: a **cold sequential read** of a %d MiB file with 1 MiB reads (--readahead, "+
		"--kernel-readahead); **cold random reads**, %d reader processes pread-ing 128 KiB blocks at a seeded "+
		"permutation of the file's blocks, %d MiB in all, none read twice, timed from their common start to the "+
		"last one's end (--reads-in-flight, --piece); **cp into the mount** of a %d MiB file from the local "+
		"disk's page cache, timed to cp's exit, close included (--writes-in-flight, --piece); a **cold find + "+
		"cat** of a tree of %d files, %.1f MiB, sizes log-normal around 3 KiB (59%% of them 4 KiB or less, 8%% "+
		"over 16 KiB, up to 100 KiB), that lists every folder and reads every file whole, and a **cold find "+
		"-ls** of the same tree, on a fresh daemon and mount of its own, that lists every folder and lstats "+
		"every entry but opens no file, as `find -ls`, `ls -lR` or `git status` do (both --inline: a larger "+
		"value spares find + cat its READs, but makes the listings carry the contents of the small files, "+
		"which find -ls fetches and never reads; `--inline 0` means the default to `peerfs mount`, so the row "+
		"0 is mounted with `--inline 1`, below every file). `peerfs stats` before and after gives the FUSE "+
		"and owner requests behind each figure, and `peerfs status` the bytes beta received from the owner "+
		"during the walks (\"from owner\": listings, inlined contents, READ replies). The native reference does "+
		"the same on the owner's disk, cold (for the walks, the files' pages: the folders and inodes stay "+
		"cached, as dropping those needs root); its cp (%s) copies within one filesystem with "+
		"copy_file_range, in the kernel. %s, every value in each, in an order that rotates from run to run; "+
		"median (min-max). The whole suite took %.0f s.\n",
		o.Size>>20, o.readers, o.randomTotal>>20, o.Size>>20, len(b.tree.files), float64(b.tree.bytes)/(1<<20),
		cpVersion(), plural(o.Runs, "run"), secs)

	if sz, _ := parseSize(defaultTuneSize); o.Size == sz {
		md.WriteString("\nThe file is 512 MiB where the other suites read 1 GiB (still 32 of the default " +
			"readahead windows): each run restarts a daemon and mounts about thirty times, and at 1 GiB three " +
			"runs would take well over ten minutes on two cores.\n")
	}

	var plots []Plot
	for _, k := range b.knobs {
		fmt.Fprintf(&md, "\n**`--%s`** (%s; default %s): %s\n\n", k.flag, k.what, k.name(k.def), strings.Join(k.work, "; "))
		header := []string{"--" + k.flag}
		for _, w := range k.work {
			prefix := ""
			if len(k.work) > 1 {
				prefix = shortWork(w) + ": "
			}
			header = append(header, prefix+tuneUnit(w))
			for _, c := range tuneCols[w] {
				if c.key == "read_ahead_kb" && k.flag != "kernel-readahead" {
					continue
				}
				header = append(header, prefix+c.head)
			}
			header = append(header, prefix+"/ best")
			if fs.get(tuneRow(tNative, w), tNative) != nil {
				header = append(header, prefix+"/ native")
			}
		}
		var rows [][]string
		for _, v := range k.values {
			name := k.name(v)
			label := name
			if a := k.arg(v); a != strconv.FormatInt(v, 10) {
				label += " (--" + k.flag + " " + a + ")"
			}
			if v == k.def {
				label += " (default)"
			}
			r := []string{label}
			for _, w := range k.work {
				row := tuneRow(k.flag, w)
				decimals := 0
				if lowerBetter(w) {
					decimals = 2
				}
				cell := fs.cell(row, name, decimals)
				if n := b.failed(row, name); n > 0 && cell == "-" {
					cell = "failed"
				} else if n > 0 {
					cell += fmt.Sprintf(", failed in %s", plural(n, "run"))
				}
				r = append(r, cell)
				for _, c := range tuneCols[w] {
					if c.key == "read_ahead_kb" && k.flag != "kernel-readahead" {
						continue
					}
					x, ok := fs.extra(row, name, c.key)
					switch {
					case !ok:
						r = append(r, "-")
					case c.kib:
						r = append(r, kib(x))
					default:
						r = append(r, fmt.Sprintf("%.0f", x))
					}
				}
				m, _, _, ok := fs.med(row, name)
				bv, okB := b.bestOf(k, w)
				bm, _, _, _ := fs.med(row, k.name(bv))
				r = append(r, ratio(speed(w, m), speed(w, bm), ok, okB))
				if fs.get(tuneRow(tNative, w), tNative) != nil {
					nm, _, _, okN := fs.med(tuneRow(tNative, w), tNative)
					r = append(r, ratio(speed(w, m), speed(w, nm), ok, okN))
				}
			}
			rows = append(rows, r)
		}
		md.WriteString(table(header, rows))
		for _, f := range b.failures {
			if !strings.HasPrefix(f.Row, k.flag+": ") {
				continue
			}
			fmt.Fprintf(&md, "\n- **Failed:** `--%s %s`, %s, run %d: %s", k.flag, f.Target,
				strings.TrimPrefix(f.Row, k.flag+": "), f.Run, f.Error)
			if f.Log != "" {
				fmt.Fprintf(&md, " (beta's log: `%s`)", f.Log)
			}
			md.WriteString("\n")
		}
		plot := b.plot(k)
		fmt.Fprintf(&md, "\n{{plot %s}}\n", plot.File)
		plots = append(plots, plot)
	}

	var nat []string
	for _, w := range tuneWorks {
		if f := fs.get(tuneRow(tNative, w), tNative); f != nil {
			nat = append(nat, fmt.Sprintf("%s %s %s", w, fs.cell(tuneRow(tNative, w), tNative, map[bool]int{true: 2, false: 0}[lowerBetter(w)]), tuneUnit(w)))
		}
	}
	if len(nat) > 0 {
		fmt.Fprintf(&md, "\nNative references, same runs: %s.\n", strings.Join(nat, "; "))
	}

	md.WriteString("\nDefaults, from these figures (keep: the default's median lies within the best value's " +
		"min-max, so these runs do not tell them apart; with one run only the best value itself is kept)")
	for _, k := range b.knobs {
		if !k.joint {
			continue
		}
		// A joint knob has one default for workloads that may want different ones.
		fmt.Fprintf(&md, ". `--%s` has one default for %s: when their verdicts disagree, it is the value whose "+
			"medians add up to the least time, and the default stays while its sum lies within that value's "+
			"summed min-max", k.flag, strings.Join(k.work, " and "))
	}
	md.WriteString(":\n\n")
	for _, k := range b.knobs {
		md.WriteString(b.verdict(k))
	}
	for _, n := range b.e.notes {
		fmt.Fprintf(&md, "- Note: %s\n", n)
	}
	return &Section{Title: "Tuning: the mount's tuning flags, one at a time", Markdown: md.String(),
		Plots: plots, Notes: b.e.notes, Raw: fs}
}

// failed counts the runs in which a workload failed with a flag value.
func (b *tuneBench) failed(row, target string) int {
	n := 0
	for _, f := range b.failures {
		if f.Row == row && f.Target == target {
			n++
		}
	}
	return n
}

func shortWork(w string) string {
	switch w {
	case wRandom:
		return "random"
	case wWrite:
		return "cp"
	case wSeq:
		return "seq"
	case wList:
		return "find -ls"
	}
	return "find+cat"
}

// verdict is a knob's line of the Defaults list: per workload the best value and where the
// default stands; then keep, or the value to change to: per workload when the knob has two
// and is not joint, one value weighed over them all when it is.
func (b *tuneBench) verdict(k *tuneKnob) string {
	var parts []string
	picks := map[string]int64{} // the value each workload's own rule picks
	for _, w := range k.work {
		p, pick, ok := b.judge(k, w)
		if !ok {
			continue
		}
		parts = append(parts, p)
		picks[w] = pick
	}
	var action string
	switch {
	case len(parts) == 0:
		action = "not measured"
	case k.joint:
		var p string
		p, action = b.weigh(k, picks)
		if p != "" {
			parts = append(parts, p)
		}
	default:
		var change []string
		for _, w := range k.work {
			if v, ok := picks[w]; ok && v != k.def {
				c := "change to " + k.name(v)
				if len(k.work) > 1 {
					c += " for " + shortWork(w)
				}
				change = append(change, c)
			}
		}
		action = "**keep**"
		if len(change) > 0 {
			action = "**" + strings.Join(change, "; ") + "**"
			if len(change) < len(parts) {
				action += " (keep for the other workload)"
			}
		}
	}
	return fmt.Sprintf("- `--%s` (default %s): %s: %s.\n", k.flag, k.name(k.def), strings.Join(parts, "; "), action)
}

// judge applies the rule to one workload: it describes the best value and where the default
// stands, and returns the value the rule picks, the default when it is kept.
func (b *tuneBench) judge(k *tuneKnob, w string) (part string, pick int64, ok bool) {
	fs := b.figs
	row := tuneRow(k.flag, w)
	bv, ok := b.bestOf(k, w)
	if !ok {
		return "", 0, false
	}
	bm, blo, bhi, _ := fs.med(row, k.name(bv))
	dm, _, _, okD := fs.med(row, k.name(k.def))
	unit := tuneUnit(w)
	part = fmt.Sprintf("%s: best %s (%s %s)", w, k.name(bv), num(bm, -1), unit)
	pick = k.def
	switch {
	case !okD:
		part += fmt.Sprintf(", the default %s not measured", k.name(k.def))
	case bv == k.def:
		part += ", the default"
	default:
		within := dm >= blo && dm <= bhi
		part += fmt.Sprintf(", the default %s %s %s (%.2f of the best), %s the best's min-max", k.name(k.def),
			num(dm, -1), unit, speed(w, dm)/speed(w, bm), map[bool]string{true: "within", false: "outside"}[within])
		if !within {
			pick = bv
		}
	}
	return part, pick, true
}

// weigh settles a joint knob's one default from its workloads' picks. When they agree, that
// is it. When they disagree, it is the value with the least summed median over the
// workloads, or the default while its sum lies within that value's summed min-max.
func (b *tuneBench) weigh(k *tuneKnob, picks map[string]int64) (part, action string) {
	decide := func(v int64) string {
		if v == k.def {
			return "**keep**"
		}
		return "**change to " + k.name(v) + "**"
	}
	var first int64
	agree, n := true, 0
	for _, w := range k.work {
		if v, ok := picks[w]; ok {
			if n > 0 && v != first {
				agree = false
			}
			first = v
			n++
		}
	}
	if n == 0 {
		return "", "not measured"
	}
	if agree {
		return "", decide(first)
	}
	// Sums over the workloads, for the values measured on all of them.
	type sum struct{ med, lo, hi float64 }
	sums := map[int64]sum{}
	for _, v := range k.values {
		var s sum
		all := true
		for _, w := range k.work {
			m, lo, hi, ok := b.figs.med(tuneRow(k.flag, w), k.name(v))
			if !ok {
				all = false
				break
			}
			s.med, s.lo, s.hi = s.med+m, s.lo+lo, s.hi+hi
		}
		if all {
			sums[v] = s
		}
	}
	var best int64
	found := false
	for _, v := range k.values {
		if s, ok := sums[v]; ok && (!found || s.med < sums[best].med) {
			best, found = v, true
		}
	}
	var names []string
	for _, w := range k.work {
		if v, ok := picks[w]; ok {
			names = append(names, shortWork(w)+" "+k.name(v))
		}
	}
	part = "the two disagree (" + strings.Join(names, ", ") + ")"
	if !found {
		return part + ", no value measured on both", "**keep**"
	}
	bs := sums[best]
	part += fmt.Sprintf("; summed, %s takes the least (%s s)", k.name(best), num(bs.med, -1))
	if ds, ok := sums[k.def]; ok && best != k.def {
		part += fmt.Sprintf(", the default %s %s s", k.name(k.def), num(ds.med, -1))
		if ds.med >= bs.lo && ds.med <= bs.hi {
			return part + ", within its summed min-max", decide(k.def)
		}
	}
	return part, decide(best)
}

// plot draws a knob's sweep: one series per workload, the median with min and max.
func (b *tuneBench) plot(k *tuneKnob) Plot {
	p := Plot{File: "tune-" + k.flag + ".png", Title: "peerfs mount --" + k.flag, LogX: true}
	p.XLabel = "--" + k.flag
	if k.bytes {
		p.XLabel += " (KiB)"
	}
	units := map[string]bool{}
	for _, w := range k.work {
		units[tuneUnit(w)] = true
		s := Series{Name: w}
		for _, v := range k.values {
			m, lo, hi, ok := b.figs.med(tuneRow(k.flag, w), k.name(v))
			if !ok {
				continue
			}
			x := float64(v)
			if k.bytes {
				x = float64(max(v, 1)) / 1024 // inline 0 is drawn at 1 byte
			}
			s.X = append(s.X, x)
			s.Y, s.YMin, s.YMax = append(s.Y, m), append(s.YMin, lo), append(s.YMax, hi)
		}
		p.Series = append(p.Series, s)
	}
	var us []string
	for u := range units {
		us = append(us, u)
	}
	slices.Sort(us)
	p.YLabel = strings.Join(us, ", ")
	return p
}
