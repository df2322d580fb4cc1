package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The meta benchmark (seed 001's table): the latency of single file-system operations
// through the peerfs mount, through sshfs and on the native disk, in the same runs. Every
// operation is a loop of one system call (or open and close) in a child process, timed as a
// whole and divided by its count:
//
//	seq_write 4K, 128K  write --write-size bytes in 4K or 128K writes to a new file, then close
//	seq_read 4K..128K   read a --read-size file through in 4K, 32K or 128K reads, after one
//	                    untimed read of it (the file is then in each target's cache)
//	create              create (O_CREAT|O_EXCL) and close --creates empty files in a new folder
//	delete              unlink them, after every create of the suite (runDeletes)
//	open+close          open and close files of a folder of --files, --opens times in turn
//	stat                stat them, --stats times in turn
//	deep_stat           stat a file 10 folders below the working directory, --stats times
//	getxattr security   ask a file for security.capability, which it lacks, --xattrs times: the
//	                    peerfs mount answers that itself (EOPNOTSUPP), so the row is the floor
//	                    of a FUSE request (the kernel asks it before the first write of every file)
//	getxattr user       the same for an absent user.* attribute, which the peerfs mount asks
//	                    the owner for: the floor of a request that makes one round trip
//
// The lookups (open, stat, deep_stat) run after one untimed pass over the same names, so
// they measure the cached path, as the seed's did. Reads and lookups use fixtures made on the
// owner's disk before the daemons start: natively they run on the owner's folder itself.
// Writes, creates and deletes go to a folder of their own on each target (native/ for the
// native disk).

type metaOptions struct {
	commonOptions
	writeSize int64
	readSize  int64
	creates   int
	files     int
	opens     int
	stats     int
	xattrs    int
	noSSHFS   bool
}

// Counts: chosen on the 2-core VM of BENCHMARKS.md so that each native loop takes from a few
// tenths of a second to two seconds (creates cost 300-450 µs there, a cached stat 1 µs) and the
// slowest target, sshfs, some tens of seconds at most: open+close at 100,000 takes 0.25 s
// natively and about 30 s through sshfs. Deletes remove the created files, so they are as
// many, and natively take only some hundredths of a second. The table prints the native
// seconds of every row beside its count.
const (
	defaultMetaWrite   = 256 << 20
	defaultMetaRead    = 1 << 30
	defaultMetaCreates = 5000
	defaultMetaFiles   = 1000
	defaultMetaOpens   = 100000
	defaultMetaStats   = 1000000
	defaultMetaXattrs  = 20000
	quickMetaWrite     = 4 << 20
	quickMetaCreates   = 200
	quickMetaFiles     = 100
	quickMetaOpens     = 2000
	quickMetaStats     = 20000
	quickMetaXattrs    = 1000
	// deepDirs is how deep deep_stat's file lies below the working directory.
	deepDirs = 10
)

// metaFuseOp is the FUSE operation ("peerfs stats" name) each row's system call turns into.
var metaFuseOp = map[string]string{"seq_write 4K": "write", "seq_write 128K": "write", "seq_read 4K": "read",
	"seq_read 32K": "read", "seq_read 128K": "read", "create": "create", "delete": "unlink",
	"open+close": "open", "stat": "getattr", "deep_stat": "lookup",
	"getxattr security": "xattr", "getxattr user": "xattr"}

// The rows, in the table's order.
var metaOps = []string{"seq_write 4K", "seq_write 128K", "seq_read 4K", "seq_read 32K", "seq_read 128K",
	"create", "delete", "open+close", "stat", "deep_stat", "getxattr security", "getxattr user"}

func init() {
	var mo metaOptions
	var writeSize, readSize string
	register(&suite{
		name:  "meta",
		usage: "[--write-size 256MiB] [--read-size 1GiB] [--creates 5000] [--files 1000] [--opens 100000] [--stats 1000000] [--xattrs 20000] [--no-sshfs]",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&writeSize, "write-size", fmt.Sprint(defaultMetaWrite), "bytes each seq_write row writes")
			fs.StringVar(&readSize, "read-size", fmt.Sprint(defaultMetaRead), "bytes each seq_read row reads")
			fs.IntVar(&mo.creates, "creates", defaultMetaCreates, "files create and delete make and remove")
			fs.IntVar(&mo.files, "files", defaultMetaFiles, "files that open+close and stat cycle over")
			fs.IntVar(&mo.opens, "opens", defaultMetaOpens, "open+close calls")
			fs.IntVar(&mo.stats, "stats", defaultMetaStats, "stat and deep_stat calls")
			fs.IntVar(&mo.xattrs, "xattrs", defaultMetaXattrs, "calls of each getxattr row")
			fs.BoolVar(&mo.noSSHFS, "no-sshfs", false, "skip the sshfs column")
		},
		quick: func(set map[string]bool) {
			for name, v := range map[string]*string{"write-size": &writeSize, "read-size": &readSize} {
				if !set[name] {
					*v = fmt.Sprint(quickMetaWrite)
				}
			}
			for name, v := range map[string]*int{"creates": &mo.creates, "files": &mo.files, "opens": &mo.opens,
				"stats": &mo.stats, "xattrs": &mo.xattrs} {
				if !set[name] {
					*v = map[string]int{"creates": quickMetaCreates, "files": quickMetaFiles,
						"opens": quickMetaOpens, "stats": quickMetaStats, "xattrs": quickMetaXattrs}[name]
				}
			}
		},
		run: func(ctx context.Context, o commonOptions) (*Section, error) {
			mo.commonOptions = o
			var err error
			if mo.writeSize, err = parseSize(writeSize); err != nil || mo.writeSize < 128<<10 {
				return nil, fmt.Errorf("bad --write-size %q (at least 128KiB)", writeSize)
			}
			if mo.readSize, err = parseSize(readSize); err != nil || mo.readSize < 128<<10 {
				return nil, fmt.Errorf("bad --read-size %q (at least 128KiB)", readSize)
			}
			if mo.creates < 1 || mo.files < 1 || mo.opens < 1 || mo.stats < 1 || mo.xattrs < 1 {
				return nil, fmt.Errorf("--creates, --files, --opens, --stats and --xattrs must be positive")
			}
			return runMeta(ctx, mo)
		},
	})
}

// metaFileName is the name of file i of a folder the meta loops work on; fixed width, so
// every name costs the same.
func metaFileName(dir string, i int) string { return fmt.Sprintf("%s/f%06d", dir, i) }

func metaNames(dir string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = metaFileName(dir, i)
	}
	return names
}

func deepPath() string {
	var parts []string
	for i := 1; i <= deepDirs; i++ {
		parts = append(parts, fmt.Sprintf("d%02d", i))
	}
	return filepath.Join(append(parts, "file")...)
}

// writeJob is the child's "write": Size bytes to a new file at Path in Buf-sized writes,
// then close, all timed.
func writeJob(j job) (jobResult, error) {
	buf := make([]byte, j.Buf)
	for i := range buf {
		buf[i] = byte(i)
	}
	var res jobResult
	t0 := time.Now()
	fd, err := unix.Open(j.Path, unix.O_CREAT|unix.O_TRUNC|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return res, fmt.Errorf("create %s: %w", j.Path, err)
	}
	for res.Bytes < j.Size {
		n, err := unix.Write(fd, buf[:min(int64(j.Buf), j.Size-res.Bytes)])
		if err != nil {
			unix.Close(fd)
			return res, fmt.Errorf("write %s: %w", j.Path, err)
		}
		res.Calls++
		res.Bytes += int64(n)
	}
	if err := unix.Close(fd); err != nil {
		return res, fmt.Errorf("close %s: %w", j.Path, err)
	}
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}

// createJob is the child's "create": N empty files in a new folder Path, each created and
// closed; the folder is made before the clock starts.
func createJob(j job) (jobResult, error) {
	if err := unix.Mkdir(j.Path, 0o755); err != nil {
		return jobResult{}, fmt.Errorf("mkdir %s: %w", j.Path, err)
	}
	names := metaNames(j.Path, j.N)
	t0 := time.Now()
	for _, n := range names {
		fd, err := unix.Open(n, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return jobResult{}, fmt.Errorf("create %s: %w", n, err)
		}
		if err := unix.Close(fd); err != nil {
			return jobResult{}, fmt.Errorf("close %s: %w", n, err)
		}
	}
	return jobResult{Seconds: time.Since(t0).Seconds(), Calls: int64(len(names))}, nil
}

// deleteJob is the child's "delete": unlink the N files createJob made in Path, then remove
// the folder after the clock stops.
func deleteJob(j job) (jobResult, error) {
	names := metaNames(j.Path, j.N)
	t0 := time.Now()
	for _, n := range names {
		if err := unix.Unlink(n); err != nil {
			return jobResult{}, fmt.Errorf("unlink %s: %w", n, err)
		}
	}
	res := jobResult{Seconds: time.Since(t0).Seconds(), Calls: int64(len(names))}
	if err := unix.Rmdir(j.Path); err != nil {
		return res, fmt.Errorf("rmdir %s: %w", j.Path, err)
	}
	return res, nil
}

// openJob is the child's "open": N opens and closes of the Files files of folder Path, in
// turn, after one untimed pass.
func openJob(j job) (jobResult, error) {
	names := metaNames(j.Path, j.Files)
	open := func(n string) error {
		fd, err := unix.Open(n, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", n, err)
		}
		if err := unix.Close(fd); err != nil {
			return fmt.Errorf("close %s: %w", n, err)
		}
		return nil
	}
	for _, n := range names {
		if err := open(n); err != nil {
			return jobResult{}, err
		}
	}
	t0 := time.Now()
	for i := 0; i < j.N; i++ {
		if err := open(names[i%len(names)]); err != nil {
			return jobResult{}, err
		}
	}
	return jobResult{Seconds: time.Since(t0).Seconds(), Calls: int64(j.N)}, nil
}

// statJob is the child's "stat": N stats of the Files files of folder Path in turn, or of
// Path itself when Files is 0, after one untimed pass.
func statJob(j job) (jobResult, error) {
	names := []string{j.Path}
	if j.Files > 0 {
		names = metaNames(j.Path, j.Files)
	}
	var st unix.Stat_t
	for _, n := range names {
		if err := unix.Stat(n, &st); err != nil {
			return jobResult{}, fmt.Errorf("stat %s: %w", n, err)
		}
	}
	t0 := time.Now()
	for i := 0; i < j.N; i++ {
		if err := unix.Stat(names[i%len(names)], &st); err != nil {
			return jobResult{}, fmt.Errorf("stat %s: %w", names[i%len(names)], err)
		}
	}
	return jobResult{Seconds: time.Since(t0).Seconds(), Calls: int64(j.N)}, nil
}

// absentXattr is the user attribute the getxattr user row asks for; no file has it.
const absentXattr = "user.peerfs-bench.absent"

// getxattrJob is the child's "getxattr": N requests for attribute Name of file Path, which
// lacks it, after one untimed request. A filesystem without extended attributes is noted:
// the kernel then answers for it.
func getxattrJob(j job) (jobResult, error) {
	var buf [64]byte
	var res jobResult
	get := func() error {
		_, err := unix.Getxattr(j.Path, j.Name, buf[:])
		switch err {
		case unix.ENODATA:
			return nil
		case unix.EOPNOTSUPP:
			res.Unsupported = true
			return nil
		case nil:
			return fmt.Errorf("getxattr %s %s: the file has the attribute; the row needs one it lacks", j.Path, j.Name)
		}
		return fmt.Errorf("getxattr %s %s: %w", j.Path, j.Name, err)
	}
	if err := get(); err != nil {
		return res, err
	}
	t0 := time.Now()
	for i := 0; i < j.N; i++ {
		if err := get(); err != nil {
			return res, err
		}
	}
	res.Seconds, res.Calls = time.Since(t0).Seconds(), int64(j.N)
	return res, nil
}

type metaBench struct {
	o    metaOptions
	e    *workEnv
	figs *figures
	// noXattrs names the targets that serve no extended attributes: their getxattr rows
	// stay empty.
	noXattrs map[string]bool
}

func runMeta(ctx context.Context, o metaOptions) (*Section, error) {
	e, err := newWorkEnv(o.commonOptions, "meta")
	if err != nil {
		return nil, err
	}
	defer e.close()
	progress("writing the fixtures: %d files, a %d-deep path, a %d MiB file...", o.files, deepDirs, o.readSize>>20)
	fix := filepath.Join(e.owner, "fixtures")
	// Created folders an interrupted run in the same --dir left behind would fail the creates.
	for _, d := range []string{filepath.Join(e.owner, "work"), filepath.Join(e.native, "work")} {
		if err := removeAll(d); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{filepath.Join(fix, "files"), filepath.Join(fix, filepath.Dir(deepPath())),
		filepath.Join(e.owner, "work"), filepath.Join(e.native, "work")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	small := make([]byte, 1024)
	for _, n := range append(metaNames(filepath.Join(fix, "files"), o.files), filepath.Join(fix, deepPath())) {
		if err := os.WriteFile(n, small, 0o644); err != nil {
			return nil, err
		}
	}
	if err := writeRandom(filepath.Join(fix, "read.bin"), o.readSize); err != nil {
		return nil, err
	}
	if err := e.start(ctx, !o.noSSHFS); err != nil {
		return nil, err
	}
	if o.noSSHFS {
		e.note("sshfs column skipped (--no-sshfs)")
	}
	b := &metaBench{o: o, e: e, noXattrs: map[string]bool{}, figs: &figures{Params: map[string]any{
		"runs": o.Runs, "write_size": o.writeSize, "read_size": o.readSize, "creates": o.creates,
		"files": o.files, "opens": o.opens, "stats": o.stats, "xattrs": o.xattrs, "deep_dirs": deepDirs,
	}}}
	targets := e.targets("work")
	for run := 0; run < o.Runs; run++ {
		for j := range targets {
			t := targets[(run+j)%len(targets)]
			if err := b.runTarget(ctx, t, run); err != nil {
				return nil, fmt.Errorf("run %d, %s: %w", run+1, t.name, err)
			}
		}
	}
	// Deletes come last, once every create is measured: ext4 (the disk of these machines)
	// skips inodes freed in the last half minute or so when it allocates one, and a create
	// that followed deletes cost 500-700 µs here against 40 µs in a fresh folder: whichever
	// target created files after another's deletes paid for them.
	for run := 0; run < o.Runs; run++ {
		for j := range targets {
			t := targets[(run+j)%len(targets)]
			if err := b.runDeletes(ctx, t, run); err != nil {
				return nil, fmt.Errorf("deletes of run %d, %s: %w", run+1, t.name, err)
			}
		}
	}
	sec := b.section(targets)
	fmt.Println()
	fmt.Println(sec.Markdown)
	return sec, nil
}

// fixtures is the fixtures folder as target t shows it: natively, the owner's own.
func (b *metaBench) fixtures(t *wtarget) string {
	switch t.name {
	case tPeerfs:
		return filepath.Join(b.e.mnt, "fixtures")
	case tSSHFS:
		return filepath.Join(b.e.sshfsMnt, "fixtures")
	}
	return filepath.Join(b.e.owner, "fixtures")
}

func (b *metaBench) runTarget(ctx context.Context, t *wtarget, run int) error {
	return t.session(ctx, func() error { return b.runJobs(ctx, t, run) })
}

// runJobs runs the rows of one run on t, which is set up.
func (b *metaBench) runJobs(ctx context.Context, t *wtarget, run int) error {
	fix := b.fixtures(t)
	xattrFile := metaFileName(filepath.Join(fix, "files"), 0) // the getxattr rows ask this file
	jobs := []struct {
		row string
		job job
	}{
		{"seq_write 4K", job{Op: "write", Path: filepath.Join(t.dir, "w4k.bin"), Size: b.o.writeSize, Buf: 4 << 10}},
		{"seq_write 128K", job{Op: "write", Path: filepath.Join(t.dir, "w128k.bin"), Size: b.o.writeSize, Buf: 128 << 10}},
		{"seq_read 4K", job{Op: "read", Path: filepath.Join(fix, "read.bin"), Buf: 4 << 10}},
		{"seq_read 32K", job{Op: "read", Path: filepath.Join(fix, "read.bin"), Buf: 32 << 10}},
		{"seq_read 128K", job{Op: "read", Path: filepath.Join(fix, "read.bin"), Buf: 128 << 10}},
		{"create", job{Op: "create", Dir: t.dir, Path: createdFolder(t, run), N: b.o.creates}},
		{"open+close", job{Op: "open", Dir: fix, Path: "files", Files: b.o.files, N: b.o.opens}},
		{"stat", job{Op: "stat", Dir: fix, Path: "files", Files: b.o.files, N: b.o.stats}},
		{"deep_stat", job{Op: "stat", Dir: fix, Path: deepPath(), N: b.o.stats}},
		{"getxattr security", job{Op: "getxattr", Path: xattrFile, Name: "security.capability", N: b.o.xattrs}},
		{"getxattr user", job{Op: "getxattr", Path: xattrFile, Name: absentXattr, N: b.o.xattrs}},
	}
	// The reads are warm: one untimed read puts the file in the target's cache.
	if _, err := runJob(ctx, job{Op: "read", Path: filepath.Join(fix, "read.bin"), Buf: 1 << 20}); err != nil {
		return err
	}
	for _, w := range jobs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := b.measure(ctx, t, run, w.row, w.job); err != nil {
			return err
		}
		if w.job.Op == "write" {
			if err := removeAll(w.job.Path); err != nil {
				return err
			}
		}
	}
	return nil
}

// createdFolder is where the creates of a run make their files on target t (peerfs and sshfs
// work in the same folder of the owner); the deletes at the end of the suite remove them.
func createdFolder(t *wtarget, run int) string { return fmt.Sprintf("c%d-%s", run+1, t.name) }

// runDeletes times the deletion of the files the creates of run made on t, through a fresh
// mount: as rm -r of a folder listed no earlier, each unlink finds its name first.
func (b *metaBench) runDeletes(ctx context.Context, t *wtarget, run int) error {
	return t.session(ctx, func() error {
		return b.measure(ctx, t, run, "delete", job{Op: "delete", Dir: t.dir, Path: createdFolder(t, run), N: b.o.creates})
	})
}

// measure runs one row's loop on t and records it, with the mount's own counts for peerfs.
func (b *metaBench) measure(ctx context.Context, t *wtarget, run int, row string, j job) error {
	var s0 *opCounts
	if t.name == tPeerfs {
		s0 = b.e.stats()
	}
	res, err := runJob(ctx, j)
	if err != nil {
		return fmt.Errorf("%s: %w", row, err)
	}
	// The peerfs mount answers EOPNOTSUPP itself for names outside user. (a share serves no
	// other namespace), and the kernel asks it every time: it stops asking a FUSE file system
	// only after ENOSYS. Elsewhere EOPNOTSUPP means the kernel answered for a file system
	// without extended attributes, so the row would time nothing of the target.
	if res.Unsupported && t.name != tPeerfs {
		b.noXattrs[t.name] = true
		progress("run %d %-7s %-15s no extended attributes: the kernel answered", run+1, t.name, row)
		return nil
	}
	us := res.Seconds / float64(res.Calls) * 1e6
	extra := map[string]float64{"calls": float64(res.Calls), "seconds": res.Seconds}
	if res.Bytes > 0 {
		extra["mib_per_s"] = mibs(res.Bytes, res.Seconds)
	}
	if s0 != nil {
		// What one call of the loop cost the mount: FUSE requests of its own kind and round
		// trips to the owner, per call (the lookups' untimed first pass is included, spread
		// over the count).
		s1 := b.e.stats()
		rt, _ := s1.since(s0, "round_trips")
		extra["round_trips_per_call"] = float64(rt) / float64(res.Calls)
		lk, _ := s1.since(s0, "lookup")
		extra["lookups_per_call"] = float64(lk) / float64(res.Calls)
		pt, _ := s1.since(s0, "passthrough_opens")
		extra["passthrough_opens"] = float64(pt)
		if op := metaFuseOp[row]; op != "" {
			n, _ := s1.since(s0, op)
			extra["fuse_per_call"] = float64(n) / float64(res.Calls)
		}
	}
	b.figs.add(row, t.name, "µs", us, extra)
	progress("run %d %-7s %-15s %10.2f µs (%d calls, %.2f s)", run+1, t.name, row, us, res.Calls, res.Seconds)
	return nil
}

func (b *metaBench) section(targets []*wtarget) *Section {
	fs := b.figs
	var names []string
	for _, t := range targets {
		names = append(names, t.name)
	}
	hasSSHFS := len(targets) == 3
	counts := map[string]string{
		"seq_write 4K":      fmt.Sprintf("%s in 4K writes", sizeName(b.o.writeSize)),
		"seq_write 128K":    fmt.Sprintf("%s in 128K writes", sizeName(b.o.writeSize)),
		"seq_read 4K":       fmt.Sprintf("%s in 4K reads", sizeName(b.o.readSize)),
		"seq_read 32K":      fmt.Sprintf("%s in 32K reads", sizeName(b.o.readSize)),
		"seq_read 128K":     fmt.Sprintf("%s in 128K reads", sizeName(b.o.readSize)),
		"create":            fmt.Sprintf("%d files", b.o.creates),
		"delete":            fmt.Sprintf("%d files", b.o.creates),
		"open+close":        fmt.Sprintf("%d over %d files", b.o.opens, b.o.files),
		"stat":              fmt.Sprintf("%d over %d files", b.o.stats, b.o.files),
		"deep_stat":         fmt.Sprintf("%d of one path", b.o.stats),
		"getxattr security": fmt.Sprintf("%d of one file", b.o.xattrs),
		"getxattr user":     fmt.Sprintf("%d of one file", b.o.xattrs),
	}
	var md strings.Builder
	sshfsText := ""
	if hasSSHFS {
		sshfsText = ", through sshfs (defaults, an sshd of the benchmark's own on 127.0.0.1)"
	}
	fmt.Fprintf(&md, "The latency of single file-system operations, after seed 001's table: through the "+
		"peerfs mount%s and on the native disk, in the same runs. Each row is one loop of system calls in a "+
		"child process, timed as a whole and divided by its count; sequential rows write a new file (close "+
		"included: peerfs and sshfs send the data to the owner by then) or read a file already read once; "+
		"open+close, stat and deep_stat (a file %d folders below the working directory) run after one untimed "+
		"pass over the same names, so they measure the cached path. Each run's creates make a new folder; "+
		"the deletes of those files run after every create of the suite, each on a fresh mount (ext4, the disk "+
		"here, is slow to allocate inodes for a minute or so after deletes, so a create that followed another "+
		"target's deletes paid for them). The getxattr rows ask a file for an attribute it lacks: "+
		"security.capability, which the peerfs mount answers itself (the floor of any FUSE request), and a "+
		"user.* attribute, which it asks the owner for (the floor of a request that makes one round trip). "+
		"Each target gets a fresh mount per run; %s, targets interleaved; µs per call, median (min-max). "+
		"Ratios are latency over the native latency: above 1 is slower.\n\n",
		sshfsText, deepDirs, plural(b.o.Runs, "run"))
	header := []string{"operation", "count", "native s"}
	for _, n := range names {
		header = append(header, n+" µs")
	}
	header = append(header, "peerfs / native")
	if hasSSHFS {
		header = append(header, "sshfs / native", "sshfs / peerfs")
	}
	var rows [][]string
	for _, op := range metaOps {
		secs, _ := fs.extra(op, tNative, "seconds")
		r := []string{op, counts[op], fmt.Sprintf("%.3f", secs)}
		for _, n := range names {
			r = append(r, fs.cell(op, n, -1))
		}
		p, _, _, okP := fs.med(op, tPeerfs)
		s, _, _, okS := fs.med(op, tSSHFS)
		n, _, _, okN := fs.med(op, tNative)
		r = append(r, ratio(p, n, okP, okN))
		if hasSSHFS {
			r = append(r, ratio(s, n, okS, okN), ratio(s, p, okS, okP))
		}
		rows = append(rows, r)
	}
	md.WriteString(table(header, rows))

	md.WriteString("\nThroughput of the sequential rows, MiB/s (medians):\n\n")
	rows = nil
	for _, op := range metaOps[:5] {
		r := []string{op}
		for _, n := range names {
			v, ok := fs.extra(op, n, "mib_per_s")
			r = append(r, map[bool]string{true: num(v, 0), false: "-"}[ok])
		}
		rows = append(rows, r)
	}
	md.WriteString(table(append([]string{"operation"}, names...), rows))
	md.WriteString("\nReading it:\n\n")
	md.WriteString(b.reading(hasSSHFS))
	for _, n := range b.e.notes {
		fmt.Fprintf(&md, "- Note: %s\n", n)
	}
	return &Section{Title: "Metadata and small I/O: per-operation latency", Markdown: md.String(),
		Notes: b.e.notes, Raw: fs}
}

func (b *metaBench) reading(hasSSHFS bool) string {
	fs := b.figs
	var md strings.Builder
	type rel struct {
		op string
		r  float64
	}
	var rs []rel
	for _, op := range metaOps {
		p, _, _, ok1 := fs.med(op, tPeerfs)
		n, _, _, ok2 := fs.med(op, tNative)
		if ok1 && ok2 && n > 0 {
			rs = append(rs, rel{op, p / n})
		}
	}
	if len(rs) > 0 {
		lo, hi := rs[0], rs[0]
		for _, r := range rs {
			if r.r < lo.r {
				lo = r
			}
			if r.r > hi.r {
				hi = r
			}
		}
		fmt.Fprintf(&md, "- **peerfs against native:** closest on %s (%.1fx native latency), farthest on %s (%.0fx).\n",
			lo.op, lo.r, hi.op, hi.r)
	}
	if hasSSHFS {
		md.WriteString(versus(fs, metaOps, "rows"))
	}
	var costs []string
	for _, op := range []string{"create", "delete", "open+close", "stat", "deep_stat"} {
		us, _, _, ok1 := fs.med(op, tPeerfs)
		rt, ok2 := fs.extra(op, tPeerfs, "round_trips_per_call")
		if ok1 && ok2 {
			costs = append(costs, fmt.Sprintf("%s %s µs and %.2f round trips", op, num(us, -1), rt))
		}
	}
	if len(costs) > 0 {
		fmt.Fprintf(&md, "- Through peerfs, per call: %s to the owner. Round trips set the cost; calls "+
			"without one are answered by the kernel's caches or the daemon's replica.\n", strings.Join(costs, "; "))
	}
	md.WriteString(b.floors())
	ds, _, _, ok4 := fs.med("deep_stat", tPeerfs)
	nds, _, _, ok5 := fs.med("deep_stat", tNative)
	st, _, _, ok3 := fs.med("stat", tPeerfs)
	if ok3 && ok4 && ok5 {
		fmt.Fprintf(&md, "- deep_stat (%d folders) costs %s µs through peerfs against %s µs for a stat in one "+
			"folder and %s µs natively.\n", deepDirs, num(ds, -1), num(st, -1), num(nds, -1))
	}
	for _, op := range metaOps {
		rt, ok1 := fs.extra(op, tPeerfs, "round_trips_per_call")
		lk, ok2 := fs.extra(op, tPeerfs, "lookups_per_call")
		if ok1 && ok2 && rt >= 1.5 {
			fmt.Fprintf(&md, "- %s makes %.2f round trips per call through peerfs, with %.2f FUSE LOOKUPs per call.\n",
				op, rt, lk)
		}
	}
	var pt []string
	for _, op := range metaOps[2:5] {
		n, ok1 := fs.extra(op, tPeerfs, "passthrough_opens")
		us, _, _, ok2 := fs.med(op, tPeerfs)
		nus, _, _, ok3 := fs.med(op, tNative)
		if ok1 && ok2 && ok3 && n > 0 {
			pt = append(pt, fmt.Sprintf("%s %s µs (native %s)", op, num(us, -1), num(nus, -1)))
		}
	}
	if len(pt) > 0 {
		fmt.Fprintf(&md, "- Reads of the cached file are opened by FUSE passthrough, so the kernel reads beta's "+
			"cache file itself: %s.\n", strings.Join(pt, ", "))
	}
	for _, op := range []string{"seq_write 4K", "seq_write 128K"} {
		mb, ok1 := fs.extra(op, tPeerfs, "mib_per_s")
		per, ok2 := fs.extra(op, tPeerfs, "fuse_per_call")
		nmb, ok3 := fs.extra(op, tNative, "mib_per_s")
		if ok1 && ok2 && ok3 {
			fmt.Fprintf(&md, "- %s: %.0f MiB/s through peerfs (%.0f natively), %.2f FUSE WRITEs per write call.\n",
				op, mb, nmb, per)
		}
	}
	return md.String()
}

// floors reads the getxattr rows: what a FUSE request and a round trip to the owner cost
// through the peerfs mount at least, and how much of a create that explains.
func (b *metaBench) floors() string {
	fs := b.figs
	var md strings.Builder
	local, _, _, ok1 := fs.med("getxattr security", tPeerfs)
	remote, _, _, ok2 := fs.med("getxattr user", tPeerfs)
	native, _, _, ok3 := fs.med("getxattr security", tNative)
	rtLocal, ok4 := fs.extra("getxattr security", tPeerfs, "round_trips_per_call")
	rtRemote, ok5 := fs.extra("getxattr user", tPeerfs, "round_trips_per_call")
	if ok1 && ok2 && ok3 && ok4 && ok5 {
		fmt.Fprintf(&md, "- Floors through peerfs: a FUSE request the mount answers itself costs %s µs "+
			"(getxattr security, %.2f round trips per call; natively %s µs); one that asks the owner costs %s µs "+
			"(getxattr user, %.2f round trips per call, an lgetxattr on the owner included). A round trip to the "+
			"owner therefore adds about %s µs to a call.\n",
			num(local, -1), rtLocal, num(native, -1), num(remote, -1), rtRemote, num(remote-local, -1))
		if c, _, _, ok := fs.med("create", tPeerfs); ok {
			fmt.Fprintf(&md, "- A create through peerfs (%s µs) waits for three FUSE requests (LOOKUP, CREATE, "+
				"FLUSH) and, in the FLUSH, one round trip: %s µs at the floors. The other %s µs is work the "+
				"floors do not include, creating the file on the owner's disk for one.\n",
				num(c, -1), num(remote+2*local, -1), num(c-remote-2*local, -1))
		}
	}
	for _, t := range []string{tSSHFS, tNative} {
		if b.noXattrs[t] {
			fmt.Fprintf(&md, "- %s serves no extended attributes: the kernel answers getxattr without asking it, "+
				"so its getxattr cells are empty.\n", t)
		}
	}
	return md.String()
}
