package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The blocksize benchmark (seed 000): what the st_blksize a mount reports does to cp. For
// each block size the mount is made with "peerfs mount --blksize N" by a freshly started beta
// daemon with an empty chunk cache; then, each timed as one cp process:
//
//	out of: cp owner's big.bin through the mount to local/out.bin, cold (owner's page cache
//	        for the file dropped, beta's chunk cache empty);
//	into:   cp local/src.bin (in the page cache) into the mount.
//
// "peerfs stats" before and after each cp gives the FUSE READ and WRITE calls the kernel
// made and their average size. The native reference copies the same files on the owner's
// disk in the same runs. The order of the targets (native, then each block size) rotates
// from run to run.

type blocksizeOptions struct {
	commonOptions
	sizes string
}

const defaultBlocksizes = "4K,16K,64K,128K,256K,1M,4M,16M"

func init() {
	var bo blocksizeOptions
	register(&suite{
		name:  "blocksize",
		usage: "[--size 1GiB] [--runs 3] [--sizes " + defaultBlocksizes + "]",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&bo.sizes, "sizes", defaultBlocksizes, "block sizes (--blksize) to mount with, comma-separated")
		},
		run: func(ctx context.Context, o commonOptions) (*Section, error) {
			bo.commonOptions = o
			return runBlocksize(ctx, bo)
		},
	})
}

// Rows of the blocksize figures; the targets are "native" and the block sizes ("4K", "1M").
const (
	dirInto = "into"
	dirOut  = "out of"
)

func runBlocksize(ctx context.Context, o blocksizeOptions) (*Section, error) {
	sizes, err := parseSizes(o.sizes)
	if err != nil {
		return nil, err
	}
	for _, s := range sizes {
		if s&(s-1) != 0 {
			// The kernel keeps st_blksize as a shift (i_blkbits): it can only report powers of two.
			return nil, fmt.Errorf("block size %d is not a power of two", s)
		}
	}
	e, err := newWorkEnv(o.commonOptions, "blocksize")
	if err != nil {
		return nil, err
	}
	defer e.close()
	big := filepath.Join(e.owner, "big.bin")
	src := filepath.Join(e.local, "src.bin")
	progress("writing two %d MiB test files...", o.Size>>20)
	if err := writeRandom(big, o.Size); err != nil {
		return nil, err
	}
	if err := writeRandom(src, o.Size); err != nil {
		return nil, err
	}
	if err := e.start(ctx, false); err != nil {
		return nil, err
	}

	// The default block size, as a default mount reports it: the figure the reading compares.
	if err := e.mountPeerfs(ctx, false); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(e.mnt, "big.bin"), &st); err != nil {
		return nil, err
	}
	defaultBlk := int64(st.Blksize)
	if err := unix.Stat(big, &st); err != nil {
		return nil, err
	}
	nativeBlk := int64(st.Blksize)

	figs := &figures{Params: map[string]any{
		"size": o.Size, "runs": o.Runs, "blksizes": sizes, "default_blksize": defaultBlk,
		"native_blksize": nativeBlk, "cp": cpVersion(),
	}}
	b := &blocksizeBench{e: e, o: o, big: big, src: src, figs: figs}
	targets := []int64{0} // 0: native
	targets = append(targets, sizes...)
	for run := 0; run < o.Runs; run++ {
		for j := range targets {
			blk := targets[(run+j)%len(targets)]
			var err error
			if blk == 0 {
				err = b.native(ctx)
			} else {
				err = b.peerfs(ctx, blk)
			}
			if err != nil {
				return nil, fmt.Errorf("run %d, %s: %w", run+1, blkName(blk), err)
			}
			for _, d := range []string{dirInto, dirOut} {
				f := figs.get(d, blkName(blk))
				progress("run %d %-7s %-6s %6.0f MiB/s", run+1, blkName(blk), d, f.Values[len(f.Values)-1])
			}
		}
	}
	sec := b.section(sizes, defaultBlk, nativeBlk)
	fmt.Println()
	fmt.Println(sec.Markdown)
	return sec, nil
}

func blkName(blk int64) string {
	if blk == 0 {
		return tNative
	}
	return sizeName(blk)
}

type blocksizeBench struct {
	e        *workEnv
	o        blocksizeOptions
	big, src string
	figs     *figures
}

// cp copies src to dst with cp and returns MiB/s. The source is read once first when warm is
// set, so that the copy into a target reads it from the page cache.
func (b *blocksizeBench) cp(ctx context.Context, src, dst string, warm bool) (float64, error) {
	if warm {
		if _, err := runJob(ctx, job{Op: "read", Path: src, Buf: 1 << 20}); err != nil {
			return 0, err
		}
	}
	secs, err := timed(func() error {
		if out, err := exec.CommandContext(ctx, "cp", src, dst).CombinedOutput(); err != nil {
			return fmt.Errorf("cp %s %s: %v %s", src, dst, err, strings.TrimSpace(string(out)))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return mibs(b.o.Size, secs), nil
}

// native copies the same files on the owner's disk.
func (b *blocksizeBench) native(ctx context.Context) error {
	out := filepath.Join(b.e.local, "out.bin")
	in := filepath.Join(b.e.native, "in.bin")
	defer func() { os.Remove(out); os.Remove(in); unix.Sync() }()
	if err := b.dropBig(); err != nil {
		return err
	}
	r, err := b.cp(ctx, b.big, out, false)
	if err != nil {
		return err
	}
	b.figs.add(dirOut, tNative, "MiB/s", r, nil)
	unix.Sync()
	w, err := b.cp(ctx, b.src, in, true)
	if err != nil {
		return err
	}
	b.figs.add(dirInto, tNative, "MiB/s", w, nil)
	return nil
}

// peerfs copies through a mount made with --blksize blk by a fresh daemon.
func (b *blocksizeBench) peerfs(ctx context.Context, blk int64) error {
	e := b.e
	out := filepath.Join(e.local, "out.bin")
	defer func() {
		e.peers.unmount(e.mnt)
		os.Remove(out)
		os.Remove(filepath.Join(e.owner, "in.bin"))
		unix.Sync()
	}()
	if err := e.mountPeerfs(ctx, true, "--blksize", fmt.Sprint(blk)); err != nil {
		return err
	}
	if err := b.dropBig(); err != nil {
		return err
	}
	name := sizeName(blk)
	s0 := e.stats()
	cpu0 := e.peers.cpu()
	r, err := b.cp(ctx, filepath.Join(e.mnt, "big.bin"), out, false)
	if err != nil {
		return err
	}
	cpu1 := e.peers.cpu()
	s1 := e.stats()
	seen, err := b.blksize(filepath.Join(e.mnt, "big.bin"), blk)
	if err != nil {
		return err
	}
	calls, bytes := s1.since(s0, "read")
	owner, _ := s1.since(s0, "owner_read")
	b.figs.add(dirOut, name, "MiB/s", r, map[string]float64{
		"fuse_calls": float64(calls), "fuse_avg_bytes": avg(bytes, calls), "owner_calls": float64(owner),
		"st_blksize": float64(seen), "cpu_seconds": cpu1 - cpu0,
	})
	unix.Sync()

	w, err := b.cp(ctx, b.src, filepath.Join(e.mnt, "in.bin"), true)
	if err != nil {
		return err
	}
	cpu2 := e.peers.cpu()
	s2 := e.stats()
	if seen, err = b.blksize(filepath.Join(e.mnt, "in.bin"), blk); err != nil {
		return err
	}
	// Close-to-open: once cp has closed the file, the owner has every byte.
	if fi, err := os.Stat(filepath.Join(e.owner, "in.bin")); err != nil || fi.Size() != b.o.Size {
		return fmt.Errorf("after cp into the mount the owner's copy is not %d bytes: %v", b.o.Size, err)
	}
	calls, bytes = s2.since(s1, "write")
	owner, _ = s2.since(s1, "owner_write")
	b.figs.add(dirInto, name, "MiB/s", w, map[string]float64{
		"fuse_calls": float64(calls), "fuse_avg_bytes": avg(bytes, calls), "owner_calls": float64(owner),
		"st_blksize": float64(seen), "cpu_seconds": cpu2 - cpu1,
	})
	return nil
}

// blksize returns the st_blksize stat reports for path through the mount; a value other than
// the one the mount was made with is noted (and shown in the table).
func (b *blocksizeBench) blksize(path string, want int64) (int64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	if int64(st.Blksize) != want {
		b.e.note("mounted with --blksize %d, stat reports st_blksize %d", want, st.Blksize)
	}
	return int64(st.Blksize), nil
}

func (b *blocksizeBench) dropBig() error {
	note, err := dropFileCache(b.big)
	if note != "" {
		b.e.note("%s", note)
	}
	return err
}

func avg(bytes, calls int64) float64 {
	if calls == 0 {
		return 0
	}
	return float64(bytes) / float64(calls)
}

// cpVersion names cp's package and version ("GNU coreutils 9.1", from the first line of
// "cp --version"): how cp sizes its buffer depends on it.
func cpVersion() string {
	out, err := exec.Command("cp", "--version").Output()
	if err != nil {
		return "version unknown"
	}
	first := strings.SplitN(string(out), "\n", 2)[0]
	return strings.TrimSpace(strings.NewReplacer("cp (", "", ")", "").Replace(first))
}

func (b *blocksizeBench) section(sizes []int64, defaultBlk, nativeBlk int64) *Section {
	fs := b.figs
	var md strings.Builder
	fmt.Fprintf(&md, "For each block size, beta's daemon is restarted with an empty chunk cache and mounts "+
		"alpha's share with `peerfs mount --blksize N`; stat through the mount must then report "+
		"st_blksize N. Two copies are timed, each one `cp` process: **out of** the mount, a %d MiB file "+
		"cold (owner's page cache for it dropped, beta's cache empty) to the local disk, and **into** the "+
		"mount, a %d MiB file from the local disk (in the page cache). `peerfs stats` before and after "+
		"each copy gives the FUSE READ and WRITE calls the kernel made and their average size. The native "+
		"reference copies the same files on the owner's disk in the same runs: there `cp` (%s) finds one "+
		"filesystem and uses copy_file_range, an in-kernel copy, so its buffer size plays no part; for a "+
		"read/write copy it would have sized its buffer from the disk's st_blksize (%d). "+
		"%s, interleaved (the order of the targets rotates); MiB/s, median (min-max).\n\n",
		b.o.Size>>20, b.o.Size>>20, cpVersion(), nativeBlk, plural(b.o.Runs, "run"))

	nIn, _, _, okIn := fs.med(dirInto, tNative)
	nOut, _, _, okOut := fs.med(dirOut, tNative)
	rows := [][]string{{"native", fmt.Sprint(nativeBlk), fs.cell(dirInto, tNative, 0), "-", "-",
		fs.cell(dirOut, tNative, 0), "-", "-", "1.00", "1.00"}}
	for _, s := range sizes {
		n := sizeName(s)
		in, _, _, ok1 := fs.med(dirInto, n)
		out, _, _, ok2 := fs.med(dirOut, n)
		seen, _ := fs.extra(dirInto, n, "st_blksize")
		wc, _ := fs.extra(dirInto, n, "fuse_calls")
		wa, _ := fs.extra(dirInto, n, "fuse_avg_bytes")
		rc, _ := fs.extra(dirOut, n, "fuse_calls")
		ra, _ := fs.extra(dirOut, n, "fuse_avg_bytes")
		rows = append(rows, []string{n, fmt.Sprint(int64(seen)),
			fs.cell(dirInto, n, 0), fmt.Sprintf("%.0f", wc), kib(wa),
			fs.cell(dirOut, n, 0), fmt.Sprintf("%.0f", rc), kib(ra),
			ratio(in, nIn, ok1, okIn), ratio(out, nOut, ok2, okOut)})
	}
	md.WriteString(table([]string{"--blksize", "st_blksize seen", "into: MiB/s", "WRITE calls", "avg WRITE",
		"out of: MiB/s", "READ calls", "avg READ", "into / native", "out of / native"}, rows))
	md.WriteString("\n{{plot blocksize.png}}\n\nReading it:\n\n")

	bestIn, bestInV := best(fs, dirInto, sizes)
	bestOut, bestOutV := best(fs, dirOut, sizes)
	fmt.Fprintf(&md, "- **Best block size into the mount: %s** (%.0f MiB/s, %.2f of native); "+
		"**out of the mount: %s** (%.0f MiB/s, %.2f of native).\n",
		sizeName(bestIn), bestInV, bestInV/nIn, sizeName(bestOut), bestOutV, bestOutV/nOut)
	for _, d := range []struct {
		row  string
		best int64
	}{{dirInto, bestIn}, {dirOut, bestOut}} {
		if tied := within(fs, d.row, d.best, sizes); len(tied) > 0 {
			fmt.Fprintf(&md, "- %s: %s overlap the best within their min-max, so at %d runs they are not "+
				"told apart from %s.\n", capitalize(d.row), strings.Join(tied, ", "), b.o.Runs, sizeName(d.best))
		}
	}
	if dIn, _, _, ok := fs.med(dirInto, sizeName(defaultBlk)); ok {
		dOut, _, _, _ := fs.med(dirOut, sizeName(defaultBlk))
		fmt.Fprintf(&md, "- The default (a mount without --blksize reports %s) copies in at %.0f%% and out at "+
			"%.0f%% of the best block size.\n", sizeName(defaultBlk), 100*dIn/bestInV, 100*dOut/bestOutV)
	} else {
		fmt.Fprintf(&md, "- The default (a mount without --blksize reports %s) was not among the sizes measured.\n",
			sizeName(defaultBlk))
	}
	md.WriteString(cpBufferReading(fs, sizes))
	lo, hi := 0.0, 0.0
	for _, s := range sizes {
		if a, ok := fs.extra(dirOut, sizeName(s), "fuse_avg_bytes"); ok && a > 0 {
			if lo == 0 || a < lo {
				lo = a
			}
			hi = max(hi, a)
		}
	}
	if lo > 0 && near(lo, hi) {
		fmt.Fprintf(&md, "- Out of the mount the FUSE READs averaged %s whatever the block size: the kernel's "+
			"readahead sizes them, not cp's buffer.\n", kib(lo))
	} else if lo > 0 {
		fmt.Fprintf(&md, "- Out of the mount the FUSE READs averaged from %s to %s across block sizes.\n", kib(lo), kib(hi))
	}
	for _, n := range b.e.notes {
		fmt.Fprintf(&md, "- Note: %s\n", n)
	}

	plot := Plot{File: "blocksize.png", Title: "cp into and out of a peerfs mount by st_blksize",
		XLabel: "st_blksize (KiB)", YLabel: "MiB/s", LogX: true}
	for _, d := range []struct{ row, name string }{{dirInto, "into the mount (cp from local disk)"},
		{dirOut, "out of the mount (cp to local disk, cold)"}} {
		s := Series{Name: d.name}
		for _, sz := range sizes {
			m, lo, hi, ok := fs.med(d.row, sizeName(sz))
			if !ok {
				continue
			}
			s.X = append(s.X, float64(sz)/1024)
			s.Y, s.YMin, s.YMax = append(s.Y, m), append(s.YMin, lo), append(s.YMax, hi)
		}
		plot.Series = append(plot.Series, s)
	}
	return &Section{Title: "Block size: cp into and out of the mount by st_blksize", Markdown: md.String(),
		Plots: []Plot{plot}, Notes: b.e.notes, Raw: fs}
}

// best returns the block size with the highest median of row, and that median.
func best(fs *figures, row string, sizes []int64) (int64, float64) {
	var bs int64
	bv := -1.0
	for _, s := range sizes {
		if m, _, _, ok := fs.med(row, sizeName(s)); ok && m > bv {
			bs, bv = s, m
		}
	}
	return bs, bv
}

// within lists the other block sizes whose range overlaps the best one's.
func within(fs *figures, row string, bestSize int64, sizes []int64) []string {
	_, blo, _, ok := fs.med(row, sizeName(bestSize))
	f := fs.get(row, sizeName(bestSize))
	if !ok || len(f.Values) < 2 {
		return nil
	}
	var out []string
	for _, s := range sizes {
		if _, _, hi, ok := fs.med(row, sizeName(s)); ok && s != bestSize && hi >= blo {
			out = append(out, sizeName(s))
		}
	}
	return out
}

// cpBufferReading says from the measured WRITE sizes how cp sized its buffer: below some block
// size they do not change (cp's own minimum), and above the FUSE request size they stop
// growing (the kernel splits larger writes).
func cpBufferReading(fs *figures, sizes []int64) string {
	var b strings.Builder
	type pt struct {
		blk int64
		avg float64
	}
	var pts []pt
	for _, s := range sizes {
		if a, ok := fs.extra(dirInto, sizeName(s), "fuse_avg_bytes"); ok && a > 0 {
			pts = append(pts, pt{s, a})
		}
	}
	if len(pts) == 0 {
		return ""
	}
	// The WRITE size stays that of the smallest block size up to where cp's minimum ends.
	floor := 0
	for floor+1 < len(pts) && near(pts[floor+1].avg, pts[0].avg) {
		floor++
	}
	if floor > 0 {
		fmt.Fprintf(&b, "- From %s to %s the WRITE calls averaged %s whatever st_blksize said: cp never uses "+
			"a buffer below its own minimum, so these block sizes measure the same copy.\n",
			sizeName(pts[0].blk), sizeName(pts[floor].blk), kib(pts[0].avg))
	}
	top := len(pts) - 1
	for top > 0 && near(pts[top-1].avg, pts[len(pts)-1].avg) {
		top--
	}
	if top < len(pts)-1 {
		fmt.Fprintf(&b, "- From %s up, the WRITE calls stay at %s: the kernel cuts cp's larger writes into "+
			"FUSE requests of at most max_write, so larger block sizes only change cp's own buffer.\n",
			sizeName(pts[top].blk), kib(pts[len(pts)-1].avg))
	}
	return b.String()
}

// near is true when two average request sizes differ by less than 5%.
func near(a, b float64) bool { return a > 0 && b > 0 && a/b < 1.05 && b/a < 1.05 }

func kib(bytes float64) string {
	if bytes <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f KiB", bytes/1024)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
