package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The patterns benchmark (seed 003): sequential and random reads with 4K to 1M buffers over
// files of 1M to 1G, in three states of the mount and natively:
//
//	cold      beta's daemon restarted with an empty chunk cache, a fresh mount, the owner's
//	          page cache for the file dropped: every byte crosses the link;
//	warm-pt   the file fully in beta's chunk cache, a fresh default mount: opens are served by
//	          FUSE passthrough, the kernel reads the cache file itself;
//	warm-nopt the same with "peerfs mount --no-passthrough", and the mount's own page cache
//	          for the file dropped before each read (fadvise), so every read is a FUSE READ
//	          served by the daemon from its cache file;
//	native    the owner's file, read in place with its page cache warm.
//
// Each read is one child process (runJob) that opens the file and times its read calls:
// sequential reads go from start to end; random reads pread a seeded permutation of
// buffer-sized offsets, at most --random-cap bytes of them. peerfs stats before and after
// count the FUSE READs that reached the daemon and the passthrough opens.

type patternsOptions struct {
	commonOptions
	files     string
	buffers   string
	randomCap int64
}

const (
	defaultPatternFiles   = "1M,500M,1G"
	defaultPatternBuffers = "4K,128K,256K,1M"
	quickPatternFiles     = "1M,16M"
	defaultRandomCap      = 64 << 20
	quickRandomCap        = 4 << 20
)

// The states, in the tables' column order.
const (
	stCold     = "cold"
	stWarmPT   = "warm-pt"
	stWarmNoPT = "warm-nopt"
)

var patternStates = []string{stCold, stWarmPT, stWarmNoPT, tNative}

var stateTitle = map[string]string{
	stCold: "cold", stWarmPT: "warm, passthrough", stWarmNoPT: "warm, no passthrough", tNative: "native",
}

func init() {
	var po patternsOptions
	var randomCap string
	register(&suite{
		name:  "patterns",
		usage: "[--files-sizes " + defaultPatternFiles + "] [--buffers " + defaultPatternBuffers + "] [--random-cap 64MiB] [--runs 3]",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&po.files, "files-sizes", defaultPatternFiles, "sizes of the files read, comma-separated")
			fs.StringVar(&po.buffers, "buffers", defaultPatternBuffers, "read buffer sizes, comma-separated")
			fs.StringVar(&randomCap, "random-cap", fmt.Sprint(defaultRandomCap), "at most this many bytes per random read run")
		},
		quick: func(set map[string]bool) {
			if !set["files-sizes"] {
				po.files = quickPatternFiles
			}
			if !set["random-cap"] {
				randomCap = fmt.Sprint(quickRandomCap)
			}
		},
		run: func(ctx context.Context, o commonOptions) (*Section, error) {
			po.commonOptions = o
			var err error
			if po.randomCap, err = parseSize(randomCap); err != nil || po.randomCap <= 0 {
				return nil, fmt.Errorf("bad --random-cap %q", randomCap)
			}
			return runPatterns(ctx, po)
		},
	})
}

// readJob is the child's "read": Path read sequentially or at random offsets with a Buf-sized
// buffer. The result counts the read calls and bytes of the timed loop.
func readJob(j job) (jobResult, error) {
	fd, err := unix.Open(j.Path, unix.O_RDONLY, 0)
	if err != nil {
		return jobResult{}, fmt.Errorf("open %s: %w", j.Path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return jobResult{}, err
	}
	if j.Drop {
		if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
			return jobResult{}, fmt.Errorf("fadvise %s: %w", j.Path, err)
		}
	}
	buf := make([]byte, j.Buf)
	for i := range buf { // fault the buffer in before the clock starts
		buf[i] = 1
	}
	var res jobResult
	if !j.Random {
		t0 := time.Now()
		for {
			n, err := unix.Read(fd, buf)
			if err != nil {
				return res, fmt.Errorf("read %s: %w", j.Path, err)
			}
			if n == 0 {
				break
			}
			res.Calls++
			res.Bytes += int64(n)
		}
		res.Seconds = time.Since(t0).Seconds()
		if res.Bytes != st.Size {
			return res, fmt.Errorf("read %d bytes of %s, want %d", res.Bytes, j.Path, st.Size)
		}
		return res, nil
	}
	offs := randomOffsets(st.Size, int64(j.Buf), j.Cap, j.Seed)
	t0 := time.Now()
	for _, off := range offs {
		n, err := unix.Pread(fd, buf, off)
		if err != nil {
			return res, fmt.Errorf("pread %s at %d: %w", j.Path, off, err)
		}
		if n != min(j.Buf, int(st.Size-off)) {
			return res, fmt.Errorf("pread %s at %d: %d bytes", j.Path, off, n)
		}
		res.Calls++
		res.Bytes += int64(n)
	}
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}

// randomOffsets returns the first cap/buf offsets (at least one) of a seeded permutation of
// the buf-aligned offsets of a file of size bytes.
func randomOffsets(size, buf, limit int64, seed uint64) []int64 {
	blocks := max((size+buf-1)/buf, 1)
	n := blocks
	if limit > 0 {
		n = min(blocks, max(limit/buf, 1))
	}
	r := rand.New(rand.NewPCG(seed, 0x706174746572))
	perm := r.Perm(int(blocks))
	offs := make([]int64, n)
	for i := range offs {
		offs[i] = int64(perm[i]) * buf
	}
	return offs
}

type patternsBench struct {
	o     patternsOptions
	e     *workEnv
	figs  *figures
	files []int64
	bufs  []int64
}

func (b *patternsBench) ownerFile(size int64) string {
	return filepath.Join(b.e.owner, "p"+sizeName(size)+".bin")
}

func (b *patternsBench) mountFile(size int64) string {
	return filepath.Join(b.e.mnt, "p"+sizeName(size)+".bin")
}

func patternRow(file, buf int64, random bool) string {
	mode := "seq"
	if random {
		mode = "random"
	}
	return fmt.Sprintf("%s %s %s", sizeName(file), mode, sizeName(buf))
}

func runPatterns(ctx context.Context, o patternsOptions) (*Section, error) {
	files, err := parseSizes(o.files)
	if err != nil {
		return nil, err
	}
	bufs, err := parseSizes(o.buffers)
	if err != nil {
		return nil, err
	}
	e, err := newWorkEnv(o.commonOptions, "patterns")
	if err != nil {
		return nil, err
	}
	defer e.close()
	var total int64
	for _, f := range files {
		total += f
	}
	progress("writing %d test files, %d MiB in all...", len(files), total>>20)
	b := &patternsBench{o: o, e: e, files: files, bufs: bufs, figs: &figures{Params: map[string]any{
		"files": files, "buffers": bufs, "random_cap": o.randomCap, "runs": o.Runs,
	}}}
	for _, f := range files {
		if err := writeRandom(b.ownerFile(f), f); err != nil {
			return nil, err
		}
	}
	if err := e.start(ctx, false); err != nil {
		return nil, err
	}
	states := map[string]func(context.Context, int) error{
		stCold: b.cold, stWarmPT: b.warmPT, stWarmNoPT: b.warmNoPT, tNative: b.native,
	}
	t0 := time.Now()
	for run := 0; run < o.Runs; run++ {
		for j := range patternStates {
			st := patternStates[(run+j)%len(patternStates)]
			ts := time.Now()
			if err := states[st](ctx, run); err != nil {
				return nil, fmt.Errorf("run %d, %s: %w", run+1, st, err)
			}
			progress("run %d %-9s done in %.1f s", run+1, st, time.Since(ts).Seconds())
		}
	}
	b.figs.Params["seconds"] = time.Since(t0).Seconds()
	sec := b.section()
	fmt.Println()
	fmt.Println(sec.Markdown)
	return sec, nil
}

// modes are the access patterns in the order the tables list them.
var modes = []bool{false, true} // sequential, random

// read runs one read of path and records it under state, with the mount's counters when the
// state reads through it.
func (b *patternsBench) read(ctx context.Context, state, path string, file, buf int64, random, drop bool) error {
	var s0 *opCounts
	if state != tNative {
		s0 = b.e.stats()
	}
	res, err := runJob(ctx, job{Op: "read", Path: path, Buf: int(buf), Random: random, Cap: b.o.randomCap,
		Drop: drop, Seed: uint64(file) ^ uint64(buf)})
	if err != nil {
		return err
	}
	extra := map[string]float64{
		"read_calls": float64(res.Calls), "us_per_call": res.Seconds / float64(res.Calls) * 1e6,
		"bytes": float64(res.Bytes), "seconds": res.Seconds,
	}
	if s0 != nil {
		s1 := b.e.stats()
		calls, bytes := s1.since(s0, "read")
		pt, _ := s1.since(s0, "passthrough_opens")
		owner, _ := s1.since(s0, "owner_read")
		extra["fuse_reads"], extra["fuse_read_avg"] = float64(calls), avg(bytes, calls)
		extra["passthrough_opens"], extra["owner_reads"] = float64(pt), float64(owner)
	}
	b.figs.add(patternRow(file, buf, random), state, "MiB/s", mibs(res.Bytes, res.Seconds), extra)
	return nil
}

// cold reads each file once per fresh daemon: one restart covers one pattern and buffer for
// every file, since reading one file leaves the others cold.
func (b *patternsBench) cold(ctx context.Context, run int) error {
	defer b.e.peers.unmount(b.e.mnt)
	for _, random := range modes {
		for _, buf := range b.bufs {
			if err := b.e.mountPeerfs(ctx, true); err != nil {
				return err
			}
			for _, f := range b.files {
				if note, err := dropFileCache(b.ownerFile(f)); err != nil {
					return err
				} else if note != "" {
					b.e.note("%s", note)
				}
				if err := b.read(ctx, stCold, b.mountFile(f), f, buf, random, false); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// prime reads every file through the mount so that beta's cache holds all of it.
func (b *patternsBench) prime(ctx context.Context, flags ...string) error {
	if err := b.e.mountPeerfs(ctx, false, flags...); err != nil {
		return err
	}
	for _, f := range b.files {
		if _, err := runJob(ctx, job{Op: "read", Path: b.mountFile(f), Buf: 1 << 20}); err != nil {
			return err
		}
	}
	// A fresh mount for the measured reads: new inodes, nothing in the kernel's page cache,
	// counters from zero.
	return b.e.mountPeerfs(ctx, false, flags...)
}

func (b *patternsBench) warmPT(ctx context.Context, run int) error {
	defer b.e.peers.unmount(b.e.mnt)
	if err := b.prime(ctx); err != nil {
		return err
	}
	return b.each(func(f, buf int64, random bool) error {
		return b.read(ctx, stWarmPT, b.mountFile(f), f, buf, random, false)
	})
}

func (b *patternsBench) warmNoPT(ctx context.Context, run int) error {
	defer b.e.peers.unmount(b.e.mnt)
	if err := b.prime(ctx, "--no-passthrough"); err != nil {
		return err
	}
	return b.each(func(f, buf int64, random bool) error {
		return b.read(ctx, stWarmNoPT, b.mountFile(f), f, buf, random, true)
	})
}

// native reads the owner's files in place. Each is first evicted and read once sequentially:
// how fast the page cache serves a file depends on how its pages got there (the folio sizes
// of the writes or readahead that filled it: a file filled by 4 KiB writes or by the owner's
// piecewise READs for a peerfs mount reads at a third of the speed of one filled by
// readahead, on this kernel), and the reference should not depend on what ran before.
func (b *patternsBench) native(ctx context.Context, run int) error {
	for _, f := range b.files {
		if note, err := dropFileCache(b.ownerFile(f)); err != nil {
			return err
		} else if note != "" {
			b.e.note("%s", note)
		}
		if _, err := runJob(ctx, job{Op: "read", Path: b.ownerFile(f), Buf: 1 << 20}); err != nil {
			return err
		}
	}
	return b.each(func(f, buf int64, random bool) error {
		return b.read(ctx, tNative, b.ownerFile(f), f, buf, random, false)
	})
}

func (b *patternsBench) each(f func(file, buf int64, random bool) error) error {
	for _, file := range b.files {
		for _, random := range modes {
			for _, buf := range b.bufs {
				if err := f(file, buf, random); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (b *patternsBench) section() *Section {
	fs := b.figs
	var md strings.Builder
	secs, _ := fs.Params["seconds"].(float64)
	fmt.Fprintf(&md, "Sequential and random reads of files of %s with buffers of %s, as in seed 003, in "+
		"four states: **cold** (beta's daemon restarted with an empty chunk cache, a fresh mount, the "+
		"owner's page cache for the file dropped); **warm, passthrough** (the file fully in beta's chunk "+
		"cache, a fresh default mount: the kernel reads the cache file itself); **warm, no passthrough** "+
		"(the same with `peerfs mount --no-passthrough`, the mount's page cache for the file dropped "+
		"before each read, so every read is a FUSE READ the daemon serves from its cache file); and "+
		"**native** (the owner's file in place, evicted and read once sequentially before, so its page cache "+
		"is as a sequential reader leaves it). Each read is one child process timing "+
		"its read calls; random reads pread a seeded permutation of buffer-aligned offsets, at most %s "+
		"per read. `peerfs stats` counts the FUSE READs that reached the daemon. %s, states "+
		"interleaved; MiB/s, median (min-max). The whole suite took %.0f s.\n",
		joinSizes(b.files), joinSizes(b.bufs), sizeName(b.o.randomCap), plural(b.o.Runs, "run"), secs)

	for _, file := range b.files {
		fmt.Fprintf(&md, "\n**File of %s** (random: %s per read)\n\n", sizeName(file), sizeName(min(file, b.o.randomCap)))
		var rows, calls [][]string
		for _, random := range modes {
			for _, buf := range b.bufs {
				row := patternRow(file, buf, random)
				mode := "sequential"
				if random {
					mode = "random"
				}
				r := []string{mode, sizeName(buf)}
				for _, st := range patternStates {
					r = append(r, fs.cell(row, st, 0))
				}
				pt, _, _, okP := fs.med(row, stWarmPT)
				np, _, _, okN := fs.med(row, stWarmNoPT)
				nat, _, _, okT := fs.med(row, tNative)
				r = append(r, ratio(pt, nat, okP, okT), ratio(pt, np, okP, okN))
				rows = append(rows, r)

				n, _ := fs.extra(row, tNative, "read_calls")
				c := []string{mode, sizeName(buf), fmt.Sprintf("%.0f", n)}
				for _, st := range patternStates {
					us, ok := fs.extra(row, st, "us_per_call")
					c = append(c, map[bool]string{true: num(us, -1), false: "-"}[ok])
				}
				var reads []string
				for _, st := range patternStates[:3] {
					fr, ok := fs.extra(row, st, "fuse_reads")
					reads = append(reads, map[bool]string{true: fmt.Sprintf("%.0f", fr), false: "-"}[ok])
				}
				calls = append(calls, append(c, strings.Join(reads, " / ")))
			}
		}
		md.WriteString(table([]string{"pattern", "buffer", "cold", "warm, passthrough", "warm, no passthrough",
			"native", "passthrough / native", "passthrough / no passthrough"}, rows))
		md.WriteString("\n")
		md.WriteString(table([]string{"pattern", "buffer", "read calls", "µs/read cold", "µs/read passthrough",
			"µs/read no passthrough", "µs/read native", "FUSE READs cold / passthrough / no passthrough"}, calls))
	}
	largest := b.files[len(b.files)-1]
	md.WriteString("\n{{plot patterns.png}}\n\nReading it:\n\n")
	md.WriteString(b.reading(largest))
	for _, n := range b.e.notes {
		fmt.Fprintf(&md, "- Note: %s\n", n)
	}

	plot := Plot{File: "patterns.png", Title: fmt.Sprintf("Reads of a %s file by buffer size", sizeName(largest)),
		XLabel: "buffer (KiB)", YLabel: "MiB/s", LogX: true, LogY: true}
	for _, random := range modes {
		for _, st := range patternStates {
			mode := "seq"
			if random {
				mode = "random"
			}
			s := Series{Name: mode + ", " + stateTitle[st]}
			for _, buf := range b.bufs {
				m, lo, hi, ok := fs.med(patternRow(largest, buf, random), st)
				if !ok {
					continue
				}
				s.X = append(s.X, float64(buf)/1024)
				s.Y, s.YMin, s.YMax = append(s.Y, m), append(s.YMin, lo), append(s.YMax, hi)
			}
			plot.Series = append(plot.Series, s)
		}
	}
	return &Section{Title: "Read patterns: sequential and random, cold, warm with and without passthrough",
		Markdown: md.String(), Plots: []Plot{plot}, Notes: b.e.notes, Raw: fs}
}

// reading writes the "reading it" list from the figures of the largest file and from the
// read counters of every file.
func (b *patternsBench) reading(largest int64) string {
	fs := b.figs
	var md strings.Builder
	big := sizeName(largest)
	top := b.bufs[len(b.bufs)-1]
	seqTop := patternRow(largest, top, false)
	pt, _, _, okP := fs.med(seqTop, stWarmPT)
	np, _, _, okN := fs.med(seqTop, stWarmNoPT)
	nat, _, _, okT := fs.med(seqTop, tNative)
	cold, _, _, okC := fs.med(seqTop, stCold)
	if okP && okN && okT && okC {
		fmt.Fprintf(&md, "- **%s, sequential, %s buffer:** cold %.0f MiB/s; warm %.0f MiB/s with passthrough, "+
			"%.0f without (%.1fx); native %.0f MiB/s, so passthrough reaches %.0f%% of native.\n",
			big, sizeName(top), cold, pt, np, pt/np, nat, 100*pt/nat)
		if pt > 1.2*nat {
			md.WriteString("- Passthrough beating native is no gain over the disk: both read a file in the page " +
				"cache, but beta's cache file was filled by large writes and the owner's file by readahead, which " +
				"most likely leaves its pages in smaller folios, slower to copy out (see native in patterns.go).\n")
		}
	}
	// Passthrough against the daemon's own reads, over every buffer and pattern of the largest file.
	lo, hi := 0.0, 0.0
	var loRow, hiRow string
	for _, random := range modes {
		for _, buf := range b.bufs {
			row := patternRow(largest, buf, random)
			p, _, _, ok1 := fs.med(row, stWarmPT)
			n, _, _, ok2 := fs.med(row, stWarmNoPT)
			if !ok1 || !ok2 || n == 0 {
				continue
			}
			if r := p / n; loRow == "" || r < lo {
				lo, loRow = r, row
			}
			if r := p / n; hiRow == "" || r > hi {
				hi, hiRow = r, row
			}
		}
	}
	if loRow != "" {
		fmt.Fprintf(&md, "- Passthrough against the daemon serving its cache (%s file): from %.1fx (%s) to "+
			"%.1fx (%s).\n", big, lo, strings.TrimPrefix(loRow, big+" "), hi, strings.TrimPrefix(hiRow, big+" "))
	}
	// Small random reads: the price of a call.
	small := b.bufs[0]
	rnd := patternRow(largest, small, true)
	seq := patternRow(largest, small, false)
	var parts []string
	for _, st := range patternStates {
		r, ok1 := fs.extra(rnd, st, "us_per_call")
		s, ok2 := fs.extra(seq, st, "us_per_call")
		if ok1 && ok2 {
			parts = append(parts, fmt.Sprintf("%s %s µs against %s", stateTitle[st], num(r, -1), num(s, -1)))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(&md, "- A random %s read of the %s file costs, per call (random against sequential): %s.\n",
			sizeName(small), big, strings.Join(parts, "; "))
	}
	// Passthrough proven by the READ counter: none should reach the daemon.
	var reached []string
	total, opened := 0, 0
	for _, file := range b.files {
		for _, random := range modes {
			for _, buf := range b.bufs {
				row := patternRow(file, buf, random)
				f := fs.get(row, stWarmPT)
				if f == nil {
					continue
				}
				for i, r := range f.Extra["fuse_reads"] {
					total++
					if f.Extra["passthrough_opens"][i] > 0 {
						opened++
					}
					if r > 0 {
						reached = append(reached, fmt.Sprintf("%s (%.0f)", row, r))
					}
				}
			}
		}
	}
	if total > 0 {
		if len(reached) == 0 {
			fmt.Fprintf(&md, "- **Passthrough:** %d of %d warm reads were opened by passthrough and no FUSE READ "+
				"reached the daemon in any of them.\n", opened, total)
		} else {
			fmt.Fprintf(&md, "- **Passthrough:** %d of %d warm reads were opened by passthrough, but FUSE READs "+
				"reached the daemon in %d: %s.\n", opened, total, len(reached), strings.Join(firstN(reached, 6), ", "))
		}
	}
	// Without passthrough, how large the kernel's READs were for the smallest sequential buffer.
	if a, ok := fs.extra(seq, stWarmNoPT, "fuse_read_avg"); ok && a > 0 {
		fr, _ := fs.extra(seq, stWarmNoPT, "fuse_reads")
		calls, _ := fs.extra(seq, tNative, "read_calls")
		fmt.Fprintf(&md, "- Without passthrough, %.0f sequential %s reads of the %s file became %.0f FUSE READs "+
			"of %s on average: the kernel's readahead, not the program's buffer, sizes them.\n",
			calls, sizeName(small), big, fr, kib(a))
	}
	// The seed's observation: on small files passthrough gains nothing.
	smallest := b.files[0]
	if smallest != largest {
		r := patternRow(smallest, small, false)
		p, _, _, ok1 := fs.med(r, stWarmPT)
		n, _, _, ok2 := fs.med(r, stWarmNoPT)
		if ok1 && ok2 {
			fmt.Fprintf(&md, "- On the %s file (sequential, %s), passthrough reads at %.0f MiB/s against %.0f "+
				"without (%.2fx); seed 003 saw no gain from passthrough at this size.\n",
				sizeName(smallest), sizeName(small), p, n, p/n)
		}
	}
	return md.String()
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "...")
	}
	return s
}

func joinSizes(xs []int64) string {
	var s []string
	for _, x := range xs {
		s = append(s, sizeName(x))
	}
	return strings.Join(s, ", ")
}
