package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peerfs/peerfs/internal/fusefs"
)

// The tree benchmark (seed 004, after compilebench): a source tree shaped like the kernel's
// is created, "compiled" (one object file per .c file, created in random order as make -j
// does, sized like its source), read back whole, and deleted, through the peerfs mount,
// through sshfs and on the native disk, in the same runs. Each phase is one child process
// timing itself. Before the read phase every cache between the reader and the owner's disk is
// emptied: the owner's page cache for the tree (fadvise per file), beta's daemon restarted with
// an empty chunk cache and a fresh mount for peerfs, a fresh mount for sshfs.
//
// With --large, a folder of --large-files small files (default 1,000,000 of 512 bytes, seed
// 004's second table) is also created, listed (getdents as ls -f, then the system's ls -l),
// read and deleted, through peerfs and natively;
// listing and reading start from a fresh mount (an empty replica), with the owner's page
// cache left warm. On the 2-core VM of BENCHMARKS.md a file costs about 0.9 ms to create and
// 0.3 ms to delete through peerfs, so one run of a million takes about half an hour; and beta's
// daemon holds the listed folder in memory (124 MiB resident after listing 100,000 files of
// 512 bytes, when all their contents stayed inline; inline contents are now capped at 64 MiB
// per mount), so a million needs several hundred MiB. --large-list-only makes the folder on
// the disks directly and times only the two listings, with beta's resident memory before and
// after each: a million files take minutes instead of most of an hour.

type treeOptions struct {
	commonOptions
	files      int
	seed       uint64
	noSSHFS    bool
	large      bool
	largeFiles int
	largeSize  int64
	listOnly   bool // --large-list-only
}

const (
	defaultTreeFiles  = 5000
	quickTreeFiles    = 300
	defaultLargeFiles = 1000000
	quickLargeFiles   = 1000
	defaultLargeSize  = 512
)

func init() {
	var to treeOptions
	var largeSize string
	register(&suite{
		name:  "tree",
		usage: "[--files 5000] [--seed 1] [--no-sshfs] [--large [--large-files 1000000] [--large-size 512] [--large-list-only]]",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&to.files, "files", defaultTreeFiles, "source files in the generated tree")
			fs.Uint64Var(&to.seed, "seed", 1, "seed of the generated tree")
			fs.BoolVar(&to.noSSHFS, "no-sshfs", false, "skip the sshfs column")
			fs.BoolVar(&to.large, "large", false, "also create, list, read and delete a folder of --large-files files")
			fs.IntVar(&to.largeFiles, "large-files", defaultLargeFiles, "files in the --large folder")
			fs.StringVar(&largeSize, "large-size", fmt.Sprint(defaultLargeSize), "bytes per file in the --large folder")
			fs.BoolVar(&to.listOnly, "large-list-only", false, "make the --large folder on the disks directly, untimed, and time only "+
				"its listing (ls -f, ls -l) and the mount daemon's memory per entry; no tree phases")
		},
		quick: func(set map[string]bool) {
			if !set["files"] {
				to.files = quickTreeFiles
			}
			if !set["large-files"] {
				to.largeFiles = quickLargeFiles
			}
		},
		run: func(ctx context.Context, o commonOptions) (*Section, error) {
			to.commonOptions = o
			var err error
			if to.largeSize, err = parseSize(largeSize); err != nil || to.largeSize < 0 {
				return nil, fmt.Errorf("bad --large-size %q", largeSize)
			}
			if to.files < 10 || to.largeFiles < 1 {
				return nil, fmt.Errorf("--files must be at least 10 and --large-files positive")
			}
			if to.listOnly {
				to.large = true
			}
			return runTree(ctx, to)
		},
	})
}

// The generated tree. Its shape follows a Linux source tree, scaled to the number of files:
//
//   - top-level folders weighted as in the kernel (drivers about 45% of the files, arch 15%,
//     fs, include, net, sound, tools, Documentation, and a few small ones);
//   - below them, folders split recursively: a folder of more than 30 files keeps 10-25% of
//     them and hands the rest to 2-10 subfolders in random shares, down to 7 levels below
//     the root (drivers/net/ethernet/intel/ixgbe/... is 5);
//   - in each folder a Makefile, and a Kconfig in two of three; the other files are .c
//     (about 60%) and .h (about 35%), a few .S and .rst;
//   - sizes log-normal around a median of 8 KiB (sigma 1.1, clipped to 200 B..256 KiB): most
//     files between 1 and 30 KiB; one file in 200 is large, 256 KiB to 4 MiB (log-uniform),
//     like the kernel's register headers and firmware tables; Makefiles and Kconfigs 200 B to
//     4 KiB. 5,000 files come to 95 MiB in 487 folders, 70,000 (a kernel) to 1.3 GiB in 4,831.
//
// The compile phase writes one .o beside every .c, of the same size, in a seeded random order.

var treeTop = []struct {
	name   string
	weight float64
}{
	{"drivers", 45}, {"arch", 15}, {"fs", 7}, {"include", 6}, {"net", 6}, {"sound", 5}, {"tools", 4},
	{"Documentation", 3}, {"kernel", 2}, {"lib", 1.5}, {"mm", 1}, {"crypto", 1}, {"security", 1},
	{"scripts", 1}, {"block", 0.5}, {"init", 0.2}, {"ipc", 0.2}, {"virt", 0.2}, {"usr", 0.1},
}

var treeWords = strings.Fields(`core main dev bus pci usb net phy mac dma irq clk gpio i2c spi
	mmc block char video sound codec power reset pinctrl regulator thermal hwmon iio input hid
	media platform common misc soc cpu mem page slab sched time trace bpf crypto hash cipher
	ext4 xfs btrfs nfs fuse proc sysfs tty serial scsi ata nvme virtio vhost rdma ipv4 ipv6
	tcp udp sock route filter bridge wireless intel amd arm x86 riscv qcom mediatek nvidia`)

type treeFile struct {
	path string
	size int64
}

type treeShape struct {
	dirs  []string // parents before children
	files []treeFile
	bytes int64
}

// kernelTree generates the tree of n source files for a seed; the same arguments give the
// same tree on every machine.
func kernelTree(n int, seed uint64) treeShape {
	r := rand.New(rand.NewPCG(seed, 0x747265652d6b))
	var t treeShape
	var total float64
	for _, top := range treeTop {
		total += top.weight
	}
	left := n
	for i, top := range treeTop {
		k := int(math.Round(float64(n) * top.weight / total))
		if i == len(treeTop)-1 {
			k = left
		}
		k = min(max(k, 1), left)
		if k == 0 {
			break
		}
		left -= k
		t.grow(r, top.name, k, 1)
	}
	return t
}

func (t *treeShape) grow(r *rand.Rand, dir string, n, depth int) {
	t.dirs = append(t.dirs, dir)
	here := n
	if n > 30 && depth < 7 {
		here = max(n*(10+r.IntN(16))/100, 1)
	}
	t.fill(r, dir, here)
	rest := n - here
	if rest == 0 {
		return
	}
	subs := min(2+r.IntN(9), rest)
	shares := make([]float64, subs)
	var sum float64
	for i := range shares {
		shares[i] = 0.2 + r.Float64()
		sum += shares[i]
	}
	for i := range shares {
		k := int(float64(rest) * shares[i] / sum)
		if i == subs-1 {
			k = rest
		}
		k = min(max(k, 1), rest)
		rest -= k
		name := fmt.Sprintf("%s/%s%d", dir, treeWords[r.IntN(len(treeWords))], i)
		t.grow(r, name, k, depth+1)
		if rest == 0 {
			break
		}
	}
}

// fill puts n files in dir: a Makefile, maybe a Kconfig, then sources.
func (t *treeShape) fill(r *rand.Rand, dir string, n int) {
	add := func(name string, size int64) {
		t.files = append(t.files, treeFile{dir + "/" + name, size})
		t.bytes += size
	}
	smallSize := func() int64 { return int64(200 * math.Pow(20, r.Float64())) } // 200 B .. 4 KiB
	add("Makefile", smallSize())
	n--
	if n > 0 && r.IntN(3) < 2 {
		add("Kconfig", smallSize())
		n--
	}
	for i := 0; i < n; i++ {
		ext := ".c"
		switch x := r.IntN(100); {
		case x < 35:
			ext = ".h"
		case x < 38:
			ext = ".S"
		case x < 40:
			ext = ".rst"
		}
		size := int64(8192 * math.Exp(1.1*r.NormFloat64()))
		size = min(max(size, 200), 256<<10)
		if r.IntN(200) == 0 {
			size = int64(float64(256<<10) * math.Pow(16, r.Float64())) // 256 KiB .. 4 MiB
		}
		add(fmt.Sprintf("%s_%d%s", treeWords[r.IntN(len(treeWords))], i, ext), size)
	}
}

// depth is how many levels of folders the tree has.
func (t *treeShape) depth() int {
	d := 0
	for _, dir := range t.dirs {
		d = max(d, strings.Count(dir, "/")+1)
	}
	return d
}

// objects returns the compile phase's .o files: one per .c, same size, in a seeded random order.
func (t *treeShape) objects(seed uint64) []treeFile {
	var objs []treeFile
	for _, f := range t.files {
		if strings.HasSuffix(f.path, ".c") {
			objs = append(objs, treeFile{strings.TrimSuffix(f.path, ".c") + ".o", f.size})
		}
	}
	r := rand.New(rand.NewPCG(seed, 0x6d616b652d6a))
	r.Shuffle(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
	return objs
}

// treeText is what the files hold: lines of words, like source. Each file is a window of it
// at a position of its own, so files differ.
func treeText() []byte {
	r := rand.New(rand.NewPCG(7, 7))
	b := make([]byte, 0, 1<<20+128)
	for len(b) < 1<<20 {
		b = append(b, strings.Repeat("\t", r.IntN(3))...)
		for w := 2 + r.IntN(8); w > 0; w-- {
			b = append(b, treeWords[r.IntN(len(treeWords))]...)
			b = append(b, ' ')
		}
		b[len(b)-1] = '\n'
	}
	return b[:1<<20]
}

// writeTreeFiles creates files under root, each written from text in pieces of at most 1 MiB.
func writeTreeFiles(root string, files []treeFile, text []byte) (int64, error) {
	var bytes int64
	for i, f := range files {
		fd, err := unix.Open(root+"/"+f.path, unix.O_CREAT|unix.O_TRUNC|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return bytes, fmt.Errorf("create %s: %w", f.path, err)
		}
		off := (i * 7919) % len(text)
		for left := f.size; left > 0; {
			piece := text[off:min(int64(len(text)), int64(off)+left)]
			n, err := unix.Write(fd, piece)
			if err != nil {
				unix.Close(fd)
				return bytes, fmt.Errorf("write %s: %w", f.path, err)
			}
			left -= int64(n)
			bytes += int64(n)
			off = 0
		}
		if err := unix.Close(fd); err != nil {
			return bytes, fmt.Errorf("close %s: %w", f.path, err)
		}
	}
	return bytes, nil
}

// treeCreateJob is the child's "tree-create": the tree of N files for Seed under a new folder
// Path: every folder, then every file, in tree order, as an unpacked archive is written.
func treeCreateJob(j job) (jobResult, error) {
	t := kernelTree(j.N, j.Seed)
	text := treeText()
	t0 := time.Now()
	if err := unix.Mkdir(j.Path, 0o755); err != nil {
		return jobResult{}, fmt.Errorf("mkdir %s: %w", j.Path, err)
	}
	for _, d := range t.dirs {
		if err := unix.Mkdir(j.Path+"/"+d, 0o755); err != nil {
			return jobResult{}, fmt.Errorf("mkdir %s: %w", d, err)
		}
	}
	bytes, err := writeTreeFiles(j.Path, t.files, text)
	if err != nil {
		return jobResult{}, err
	}
	return jobResult{Seconds: time.Since(t0).Seconds(), Calls: int64(len(t.files) + len(t.dirs)),
		Bytes: bytes, Files: int64(len(t.files))}, nil
}

// treeCompileJob is the child's "tree-compile": one .o per .c, in random order.
func treeCompileJob(j job) (jobResult, error) {
	t := kernelTree(j.N, j.Seed)
	objs := t.objects(j.Seed)
	text := treeText()
	t0 := time.Now()
	bytes, err := writeTreeFiles(j.Path, objs, text)
	if err != nil {
		return jobResult{}, err
	}
	return jobResult{Seconds: time.Since(t0).Seconds(), Calls: int64(len(objs)), Bytes: bytes, Files: int64(len(objs))}, nil
}

// treeReadJob is the child's "tree-read": every file under Path, folder by folder in listing
// order, each read whole with 128 KiB reads (cat's buffer); the total must be what the create
// and compile phases wrote.
func treeReadJob(j job) (jobResult, error) {
	t := kernelTree(j.N, j.Seed)
	want := t.bytes
	for _, o := range t.objects(j.Seed) {
		want += o.size
	}
	buf := make([]byte, 128<<10)
	var res jobResult
	t0 := time.Now()
	if err := readTree(j.Path, buf, &res); err != nil {
		return res, err
	}
	res.Seconds = time.Since(t0).Seconds()
	if res.Bytes != want {
		return res, fmt.Errorf("read %d bytes in %d files under %s, want %d", res.Bytes, res.Files, j.Path, want)
	}
	return res, nil
}

func readTree(dir string, buf []byte, res *jobResult) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	res.Calls++
	for _, e := range ents {
		p := dir + "/" + e.Name()
		if e.IsDir() {
			if err := readTree(p, buf, res); err != nil {
				return err
			}
			continue
		}
		n, err := readWhole(p, buf)
		if err != nil {
			return err
		}
		res.Files++
		res.Bytes += n
	}
	return nil
}

// readWhole reads a file to its end and returns its length.
func readWhole(p string, buf []byte) (int64, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", p, err)
	}
	defer unix.Close(fd)
	var total int64
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			return total, fmt.Errorf("read %s: %w", p, err)
		}
		if n == 0 {
			return total, nil
		}
		total += int64(n)
	}
}

// treeDeleteJob is the child's "tree-delete": rm -r of Path.
func treeDeleteJob(j job) (jobResult, error) {
	var res jobResult
	t0 := time.Now()
	if err := removeTree(j.Path, &res); err != nil {
		return res, err
	}
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}

// removeTree removes dir and everything below it, as rm -r does: list, unlink the files,
// recurse into folders, remove the emptied folder.
func removeTree(dir string, res *jobResult) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := dir + "/" + e.Name()
		if e.IsDir() {
			if err := removeTree(p, res); err != nil {
				return err
			}
			continue
		}
		if err := unix.Unlink(p); err != nil {
			return fmt.Errorf("unlink %s: %w", p, err)
		}
		res.Calls++
		res.Files++
	}
	if err := unix.Rmdir(dir); err != nil {
		return fmt.Errorf("rmdir %s: %w", dir, err)
	}
	res.Calls++
	return nil
}

// treeStatJob is the child's "tree-stat": lstat of every entry under Path, folder by folder
// in listing order, as find -ls or a build's up-to-date check does; the files found must be
// the tree's sources and objects.
func treeStatJob(j job) (jobResult, error) {
	t := kernelTree(j.N, j.Seed)
	want := int64(len(t.files) + len(t.objects(j.Seed)))
	var res jobResult
	t0 := time.Now()
	if err := statTree(j.Path, &res); err != nil {
		return res, err
	}
	res.Seconds = time.Since(t0).Seconds()
	if res.Files != want {
		return res, fmt.Errorf("found %d files under %s, want %d", res.Files, j.Path, want)
	}
	return res, nil
}

func statTree(dir string, res *jobResult) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	res.Calls++
	var st unix.Stat_t
	for _, e := range ents {
		p := dir + "/" + e.Name()
		if err := unix.Lstat(p, &st); err != nil {
			return fmt.Errorf("lstat %s: %w", p, err)
		}
		res.Calls++
		if e.IsDir() {
			if err := statTree(p, res); err != nil {
				return err
			}
			continue
		}
		res.Files++
	}
	return nil
}

// treeRmrfJob is the child's "tree-rmrf": the system's rm -rf of Path, timed whole.
func treeRmrfJob(j job) (jobResult, error) {
	t := kernelTree(j.N, j.Seed)
	t0 := time.Now()
	if out, err := exec.Command("rm", "-rf", j.Path).CombinedOutput(); err != nil {
		return jobResult{}, fmt.Errorf("rm -rf %s: %v: %s", j.Path, err, out)
	}
	res := jobResult{Seconds: time.Since(t0).Seconds(), Files: int64(len(t.files)), Calls: int64(len(t.files) + len(t.dirs))}
	if _, err := os.Lstat(j.Path); !errors.Is(err, os.ErrNotExist) {
		return res, fmt.Errorf("rm -rf left %s: %v", j.Path, err)
	}
	return res, nil
}

// The --large folder: N files of Size bytes named f0000000.., in one folder Path.

func largeName(dir string, i int) string { return fmt.Sprintf("%s/f%07d", dir, i) }

func manyCreateJob(j job) (jobResult, error) {
	data := treeText()[:j.Size]
	names := make([]string, j.N)
	for i := range names {
		names[i] = largeName(j.Path, i)
	}
	t0 := time.Now()
	if err := unix.Mkdir(j.Path, 0o755); err != nil {
		return jobResult{}, fmt.Errorf("mkdir %s: %w", j.Path, err)
	}
	for _, n := range names {
		fd, err := unix.Open(n, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return jobResult{}, fmt.Errorf("create %s: %w", n, err)
		}
		if len(data) > 0 {
			if _, err := unix.Write(fd, data); err != nil {
				unix.Close(fd)
				return jobResult{}, fmt.Errorf("write %s: %w", n, err)
			}
		}
		if err := unix.Close(fd); err != nil {
			return jobResult{}, fmt.Errorf("close %s: %w", n, err)
		}
	}
	return jobResult{Seconds: time.Since(t0).Seconds(), Calls: int64(j.N), Files: int64(j.N), Bytes: int64(j.N) * j.Size}, nil
}

// manyListJob lists the folder with getdents64 (as ls -f does: names and types, no stat).
func manyListJob(j job) (jobResult, error) {
	buf := make([]byte, 64<<10)
	t0 := time.Now()
	fd, err := unix.Open(j.Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return jobResult{}, fmt.Errorf("open %s: %w", j.Path, err)
	}
	defer unix.Close(fd)
	var res jobResult
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return res, fmt.Errorf("getdents %s: %w", j.Path, err)
		}
		if n == 0 {
			break
		}
		res.Calls++
		for off := 0; off < n; {
			reclen := int(buf[off+16]) | int(buf[off+17])<<8
			if name := buf[off+19 : off+reclen]; name[0] != '.' {
				res.Files++
			}
			off += reclen
		}
	}
	res.Seconds = time.Since(t0).Seconds()
	if res.Files != int64(j.N) {
		return res, fmt.Errorf("listed %d files in %s, want %d", res.Files, j.Path, j.N)
	}
	return res, nil
}

// manyLongListJob runs the system's ls -l on the folder: getdents, then for every entry the
// lstat and the extended attribute lookups (security.selinux, POSIX ACLs) ls makes, and the
// sort of the names.
func manyLongListJob(j job) (jobResult, error) {
	out, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return jobResult{}, err
	}
	defer out.Close()
	cmd := exec.Command("ls", "-l", j.Path)
	cmd.Stdout = out
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return jobResult{}, fmt.Errorf("ls -l %s: %v: %s", j.Path, err, strings.TrimSpace(stderr.String()))
	}
	return jobResult{Seconds: time.Since(t0).Seconds(), Calls: 1, Files: int64(j.N)}, nil
}

func manyReadJob(j job) (jobResult, error) {
	buf := make([]byte, 128<<10)
	var res jobResult
	t0 := time.Now()
	for i := 0; i < j.N; i++ {
		n, err := readWhole(largeName(j.Path, i), buf)
		if err != nil {
			return res, err
		}
		if n != j.Size {
			return res, fmt.Errorf("%s has %d bytes, want %d", largeName(j.Path, i), n, j.Size)
		}
		res.Bytes += n
		res.Calls++
	}
	res.Files = res.Calls
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}

func manyDeleteJob(j job) (jobResult, error) {
	t0 := time.Now()
	for i := 0; i < j.N; i++ {
		if err := unix.Unlink(largeName(j.Path, i)); err != nil {
			return jobResult{}, fmt.Errorf("unlink %s: %w", largeName(j.Path, i), err)
		}
	}
	if err := unix.Rmdir(j.Path); err != nil {
		return jobResult{}, fmt.Errorf("rmdir %s: %w", j.Path, err)
	}
	return jobResult{Seconds: time.Since(t0).Seconds(), Calls: int64(j.N), Files: int64(j.N)}, nil
}

// The phases, in the table's order.
var (
	treePhases  = []string{"create", "compile", "stat", "read", "delete", "rm -rf"}
	largePhases = []string{"large create", "large list", "large ls -l", "large read", "large delete"}
	// largeOps are the jobs of largePhases.
	largeOps = []string{"many-create", "many-list", "many-lsl", "many-read", "many-delete"}
)

type treeBench struct {
	o     treeOptions
	e     *workEnv
	shape treeShape
	objs  []treeFile
	figs  *figures
}

func runTree(ctx context.Context, o treeOptions) (*Section, error) {
	e, err := newWorkEnv(o.commonOptions, "tree")
	if err != nil {
		return nil, err
	}
	defer e.close()
	for _, d := range []string{filepath.Join(e.owner, "work"), filepath.Join(e.native, "work")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := e.start(ctx, !o.noSSHFS); err != nil {
		return nil, err
	}
	if o.noSSHFS {
		e.note("sshfs column skipped (--no-sshfs)")
	}
	b := &treeBench{o: o, e: e, shape: kernelTree(o.files, o.seed)}
	b.objs = b.shape.objects(o.seed)
	b.figs = &figures{Params: map[string]any{"runs": o.Runs, "files": len(b.shape.files), "dirs": len(b.shape.dirs),
		"bytes": b.shape.bytes, "objects": len(b.objs), "seed": o.seed}}
	if o.large {
		b.figs.Params["large_files"], b.figs.Params["large_size"] = o.largeFiles, o.largeSize
	}
	progress("tree: %d files in %d folders, %d MiB; %d objects", len(b.shape.files), len(b.shape.dirs),
		b.shape.bytes>>20, len(b.objs))
	targets := e.targets("work")
	for run := 0; run < o.Runs && !o.listOnly; run++ {
		for j := range targets {
			t := targets[(run+j)%len(targets)]
			if err := b.runTarget(ctx, t, run); err != nil {
				return nil, fmt.Errorf("run %d, %s: %w", run+1, t.name, err)
			}
		}
	}
	if o.large {
		var large []*wtarget
		for _, t := range targets {
			if t.name != tSSHFS {
				large = append(large, t)
			}
		}
		for run := 0; run < o.Runs; run++ {
			for j := range large {
				t := large[(run+j)%len(large)]
				if err := b.runLarge(ctx, t, run); err != nil {
					return nil, fmt.Errorf("large, run %d, %s: %w", run+1, t.name, err)
				}
			}
		}
	}
	sec := b.section(targets)
	fmt.Println()
	fmt.Println(sec.Markdown)
	return sec, nil
}

// fresh gives a target an empty cache between it and the owner's disk: a new daemon with an
// empty chunk cache and a new mount for peerfs, a new mount for sshfs.
func (b *treeBench) fresh(ctx context.Context, t *wtarget) error {
	switch t.name {
	case tPeerfs:
		return b.e.mountPeerfs(ctx, true)
	case tSSHFS:
		return b.e.mountSSHFS(ctx)
	}
	return nil
}

// phase runs one phase's job and records its seconds, with the mount's round trips for peerfs.
func (b *treeBench) phase(ctx context.Context, t *wtarget, row string, j job, run int) error {
	var s0 *opCounts
	if t.name == tPeerfs {
		s0 = b.e.stats()
	}
	res, err := runJob(ctx, j)
	if err != nil {
		return fmt.Errorf("%s: %w", row, err)
	}
	extra := map[string]float64{"files": float64(res.Files), "bytes": float64(res.Bytes), "calls": float64(res.Calls)}
	if res.Bytes > 0 {
		extra["mib_per_s"] = mibs(res.Bytes, res.Seconds)
	}
	if s0 != nil {
		rt, _ := b.e.stats().since(s0, "round_trips")
		extra["round_trips"] = float64(rt)
	}
	b.figs.add(row, t.name, "s", res.Seconds, extra)
	progress("run %d %-7s %-13s %8.2f s", run+1, t.name, row, res.Seconds)
	return nil
}

func (b *treeBench) runTarget(ctx context.Context, t *wtarget, run int) error {
	return t.session(ctx, func() error { return b.runPhases(ctx, t, run) })
}

// runPhases runs the create and compile phases of one run on t, which is set up.
func (b *treeBench) runPhases(ctx context.Context, t *wtarget, run int) error {
	root := filepath.Join(t.dir, "linux")
	base := job{Path: root, N: b.o.files, Seed: b.o.seed}
	for _, p := range []string{"create", "compile"} {
		j := base
		j.Op = "tree-" + p
		if err := b.phase(ctx, t, p, j, run); err != nil {
			return err
		}
	}
	// Cold: the stat and the read phases each start with every cache emptied.
	for _, p := range []string{"stat", "read"} {
		if err := b.cold(ctx, t, "linux"); err != nil {
			return err
		}
		j := base
		j.Op = "tree-" + p
		if err := b.phase(ctx, t, p, j, run); err != nil {
			return err
		}
	}
	j := base
	j.Op = "tree-delete"
	if err := b.phase(ctx, t, "delete", j, run); err != nil {
		return err
	}
	// rm -rf of the sources, untimed to make, from a cold start as after a remount.
	j = job{Op: "tree-create", Path: filepath.Join(t.dir, "linux-rm"), N: b.o.files, Seed: b.o.seed}
	if _, err := runJob(ctx, j); err != nil {
		return fmt.Errorf("rm -rf's tree: %w", err)
	}
	if err := b.cold(ctx, t, "linux-rm"); err != nil {
		return err
	}
	j.Op = "tree-rmrf"
	return b.phase(ctx, t, "rm -rf", j, run)
}

// cold empties every cache between t and the owner's copy of the tree name: the owner's page
// cache for its files, and for the mounts a new mount (for peerfs a new daemon with an empty
// chunk cache).
func (b *treeBench) cold(ctx context.Context, t *wtarget, name string) error {
	if err := dropTree(filepath.Join(t.ownerDir, name)); err != nil {
		return err
	}
	return b.fresh(ctx, t)
}

func (b *treeBench) runLarge(ctx context.Context, t *wtarget, run int) error {
	if !b.o.listOnly {
		return t.session(ctx, func() error { return b.runLargePhases(ctx, t, run) })
	}
	// The folder is made on the disk the target shows, untimed, before the target is mounted,
	// so no mount sees a change event for it.
	j := job{Op: "many-create", Path: filepath.Join(t.ownerDir, "many"), N: b.o.largeFiles, Size: b.o.largeSize}
	progress("run %d %-7s making %d files in %s", run+1, t.name, j.N, j.Path)
	if _, err := runJob(ctx, j); err != nil {
		return fmt.Errorf("making the folder: %w", err)
	}
	defer os.RemoveAll(j.Path)
	return t.session(ctx, func() error { return b.runLargePhases(ctx, t, run) })
}

// runLargePhases runs the many-files phases of one run on t, which is set up. On peerfs the
// resident memory of beta's daemon is sampled before the listing and after each listing
// phase: its growth over the entries listed is the memory per entry.
func (b *treeBench) runLargePhases(ctx context.Context, t *wtarget, run int) error {
	j := job{Path: filepath.Join(t.dir, "many"), N: b.o.largeFiles, Size: b.o.largeSize}
	var rss0 float64
	for i, op := range largeOps {
		listing := op == "many-list" || op == "many-lsl"
		if b.o.listOnly && !listing {
			continue
		}
		if op == "many-list" { // list and read from an empty replica, as after a remount
			if err := b.fresh(ctx, t); err != nil {
				return err
			}
			rss0 = b.betaRSS(t)
		}
		j.Op = op
		if err := b.phase(ctx, t, largePhases[i], j, run); err != nil {
			return err
		}
		if rss := b.betaRSS(t); listing && rss0 > 0 && rss > 0 {
			f := b.figs.get(largePhases[i], t.name)
			f.Extra["rss_growth_bytes_per_entry"] = append(f.Extra["rss_growth_bytes_per_entry"], (rss-rss0)*(1<<20)/float64(j.N))
			f.Extra["rss_mib"] = append(f.Extra["rss_mib"], rss)
			f.Extra["rss_mib_before"] = append(f.Extra["rss_mib_before"], rss0)
		}
	}
	return nil
}

// betaRSS is the resident memory of beta's daemon in MiB when t is the peerfs mount, else 0.
func (b *treeBench) betaRSS(t *wtarget) float64 {
	if t.name != tPeerfs || b.e.peers.procs[1] == nil {
		return 0
	}
	return procRSS(b.e.peers.procs[1].Process.Pid)
}

func (b *treeBench) section(targets []*wtarget) *Section {
	fs := b.figs
	var names []string
	for _, t := range targets {
		names = append(names, t.name)
	}
	hasSSHFS := slices.Contains(names, tSSHFS)
	var objBytes int64
	for _, o := range b.objs {
		objBytes += o.size
	}
	sizes := make([]int64, len(b.shape.files))
	for i, f := range b.shape.files {
		sizes[i] = f.size
	}
	slices.Sort(sizes)
	var under30 int
	for _, s := range sizes {
		if s <= 30<<10 {
			under30++
		}
	}
	var md strings.Builder
	if b.o.listOnly {
		md.WriteString(b.largeSection(names))
		for _, n := range b.e.notes {
			fmt.Fprintf(&md, "- Note: %s\n", n)
		}
		return &Section{Title: "A million-file folder: ls -f, ls -l and memory per entry", Markdown: md.String(),
			Notes: b.e.notes, Raw: fs}
	}
	sshfsText := ""
	if hasSSHFS {
		sshfsText = ", through sshfs"
	}
	fmt.Fprintf(&md, "A compilebench-like workload (seed 004) through the peerfs mount%s and on the native disk, "+
		"in the same runs. The tree is generated from a seed with the shape of a Linux source tree: "+
		"**%d files in %d folders, %.0f MiB**, folders up to %d levels deep, top-level folders weighted as in the kernel "+
		"(drivers, arch, fs, include, net...); a Makefile in every folder, .c and .h files with log-normal "+
		"sizes (median %s, %d%% at most 30 KiB, the largest %s). The phases, each one child process timed "+
		"as a whole: **create** the folders and files as an unpacked archive is written; **compile**: one .o "+
		"beside each of the %d .c files, of the same size, in random order (%.0f MiB); **read** every file "+
		"whole, folder by folder; **stat**: lstat of every entry, folder by folder (find -ls, a build's "+
		"up-to-date check); stat and read each start with every cache between the reader and the owner's disk "+
		"emptied (owner's page cache dropped; for peerfs a new daemon with an empty chunk cache and a new mount; for "+
		"sshfs a new mount); **delete** it all after the read, as rm -r; **rm -rf**: the system's rm -rf of the "+
		"sources, made again untimed, from a cold start as for stat. %s, targets interleaved; seconds, median "+
		"(min-max). Ratios are seconds over the native seconds: above 1 is slower.\n\n",
		sshfsText, len(b.shape.files), len(b.shape.dirs), float64(b.shape.bytes)/(1<<20), b.shape.depth(),
		kib(float64(sizes[len(sizes)/2])), 100*under30/len(sizes), kib(float64(sizes[len(sizes)-1])),
		len(b.objs), float64(objBytes)/(1<<20), plural(b.o.Runs, "run"))
	md.WriteString(b.phaseTable(treePhases, names, hasSSHFS))
	if b.o.large {
		md.WriteString("\n")
		md.WriteString(b.largeSection(names))
	}
	md.WriteString("\nReading it:\n\n")
	md.WriteString(b.reading(hasSSHFS))
	for _, n := range b.e.notes {
		fmt.Fprintf(&md, "- Note: %s\n", n)
	}
	return &Section{Title: "Source tree: create, compile, read, delete (compilebench-like)", Markdown: md.String(),
		Notes: b.e.notes, Raw: fs}
}

// largeSection is the --large folder's table and what to read in it.
func (b *treeBench) largeSection(names []string) string {
	fs := b.figs
	var ln []string
	for _, n := range names {
		if n != tSSHFS {
			ln = append(ln, n)
		}
	}
	var md strings.Builder
	phases := largePhases
	if b.o.listOnly {
		phases = []string{"large list", "large ls -l"}
		fmt.Fprintf(&md, "**A folder of %d files of %d bytes** (--large --large-list-only; seed 004's million-file "+
			"table), made on the owner's disk and on the native disk directly, untimed; timed: listed with getdents "+
			"(**large list**, as ls -f: names and types) from a new mount (a new daemon, an empty replica), then "+
			"**large ls -l** (the system's ls -l: lstat and extended attribute lookups of every entry, sorted) on the "+
			"same mount; the owner's page cache warm. %s, targets interleaved; seconds, median (min-max).\n\n",
			b.o.largeFiles, b.o.largeSize, plural(b.o.Runs, "run"))
	} else {
		fmt.Fprintf(&md, "**A folder of %d files of %d bytes** (--large; seed 004's million-file table): created "+
			"(create, write, close each), listed (getdents, as ls -f), listed with the system's ls -l, read (open, "+
			"read, close each) and deleted (unlink each); listing and reading start from a new mount (an empty "+
			"replica), with the owner's page cache warm.\n\n", b.o.largeFiles, b.o.largeSize)
	}
	md.WriteString(b.phaseTable(phases, ln, false))
	md.WriteString("\n")
	for _, n := range ln {
		if s, _, _, ok := fs.med("large list", n); ok {
			fmt.Fprintf(&md, "- ls -f on %s: %.0f entries/s.\n", n, float64(b.o.largeFiles)/s)
		}
	}
	if p, _, _, ok := fs.med("large ls -l", tPeerfs); ok {
		if n, _, _, ok := fs.med("large ls -l", tNative); ok {
			fmt.Fprintf(&md, "- ls -l: peerfs %.1f s, native %.1f s (%.1fx).\n", p, n, p/n)
		}
	}
	for _, ph := range []string{"large list", "large ls -l"} {
		per, ok := fs.extra(ph, tPeerfs, "rss_growth_bytes_per_entry")
		if !ok {
			continue
		}
		before, _ := fs.extra(ph, tPeerfs, "rss_mib_before")
		after, _ := fs.extra(ph, tPeerfs, "rss_mib")
		fmt.Fprintf(&md, "- beta's daemon after %s: %.0f MiB resident (%.0f MiB before the listing), %.0f bytes per "+
			"listed entry.\n", strings.TrimPrefix(ph, "large "), after, before, per)
	}
	return md.String()
}

func (b *treeBench) phaseTable(phases, names []string, hasSSHFS bool) string {
	fs := b.figs
	header := []string{"phase"}
	for _, n := range names {
		header = append(header, n+" s")
	}
	header = append(header, "peerfs MiB/s", "peerfs / native")
	if hasSSHFS {
		header = append(header, "sshfs / native", "sshfs / peerfs")
	}
	var rows [][]string
	for _, ph := range phases {
		r := []string{ph}
		for _, n := range names {
			r = append(r, fs.cell(ph, n, 2))
		}
		mb, ok := fs.extra(ph, tPeerfs, "mib_per_s")
		r = append(r, map[bool]string{true: num(mb, 0), false: "-"}[ok])
		p, _, _, okP := fs.med(ph, tPeerfs)
		s, _, _, okS := fs.med(ph, tSSHFS)
		n, _, _, okN := fs.med(ph, tNative)
		r = append(r, ratio(p, n, okP, okN))
		if hasSSHFS {
			r = append(r, ratio(s, n, okS, okN), ratio(s, p, okS, okP))
		}
		rows = append(rows, r)
	}
	return table(header, rows)
}

func (b *treeBench) reading(hasSSHFS bool) string {
	fs := b.figs
	var md strings.Builder
	var total = map[string]float64{}
	complete := map[string]bool{tPeerfs: true, tSSHFS: hasSSHFS, tNative: true}
	for _, ph := range treePhases {
		for n := range complete {
			m, _, _, ok := fs.med(ph, n)
			if !ok {
				complete[n] = false
			}
			total[n] += m
		}
	}
	if complete[tPeerfs] && complete[tNative] {
		fmt.Fprintf(&md, "- **All phases:** peerfs %.1f s, native %.1f s (%.1fx)", total[tPeerfs], total[tNative],
			total[tPeerfs]/total[tNative])
		if complete[tSSHFS] {
			fmt.Fprintf(&md, ", sshfs %.1f s (%.1fx native; peerfs takes %.0f%% of sshfs's time)", total[tSSHFS],
				total[tSSHFS]/total[tNative], 100*total[tPeerfs]/total[tSSHFS])
		}
		md.WriteString(".\n")
	}
	worst, worstR := "", 0.0
	for _, ph := range treePhases {
		p, _, _, ok1 := fs.med(ph, tPeerfs)
		n, _, _, ok2 := fs.med(ph, tNative)
		if ok1 && ok2 && n > 0 && p/n > worstR {
			worst, worstR = ph, p/n
		}
	}
	if worst != "" {
		rt, _ := fs.extra(worst, tPeerfs, "round_trips")
		files, _ := fs.extra(worst, tPeerfs, "files")
		fmt.Fprintf(&md, "- Farthest from native: **%s** (%.1fx), with %.0f round trips to the owner for %.0f files "+
			"(%.2f per file).\n", worst, worstR, rt, files, rt/max(files, 1))
	}
	if rt, ok := fs.extra("read", tPeerfs, "round_trips"); ok {
		files, _ := fs.extra("read", tPeerfs, "files")
		small := 0
		for _, f := range b.shape.files {
			if f.size <= fusefs.DefaultInline {
				small++
			}
		}
		fmt.Fprintf(&md, "- The cold read made %.0f round trips for %.0f files (%.2f per file); %d%% of the sources "+
			"are at most %s, peerfs's default inline size, and come with their folder's listing.\n",
			rt, files, rt/max(files, 1), 100*small/len(b.shape.files), spelledSize(fusefs.DefaultInline))
	}
	if hasSSHFS {
		md.WriteString(versus(fs, treePhases, "phases"))
	}
	if b.o.large {
		var parts []string
		for _, ph := range largePhases {
			p, _, _, ok1 := fs.med(ph, tPeerfs)
			n, _, _, ok2 := fs.med(ph, tNative)
			if ok1 && ok2 {
				parts = append(parts, fmt.Sprintf("%s %s µs (native %s)", strings.TrimPrefix(ph, "large "),
					num(p/float64(b.o.largeFiles)*1e6, -1), num(n/float64(b.o.largeFiles)*1e6, -1)))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(&md, "- The %d-file folder, per file through peerfs: %s.\n", b.o.largeFiles, strings.Join(parts, ", "))
		}
	}
	return md.String()
}
