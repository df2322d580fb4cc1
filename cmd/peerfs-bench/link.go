package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/transport"
)

// sample is one timed run of one path.
type sample struct {
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
	RSSMiB     float64 `json:"rss_mib,omitempty"` // peak RSS of the larger daemon
}

type pathResult struct {
	Name    string   `json:"name"`
	Samples []sample `json:"samples"`
}

type report struct {
	Machine string       `json:"machine"`
	Size    int64        `json:"size"`
	Runs    int          `json:"runs"`
	Paths   []pathResult `json:"paths"`
	Notes   []string     `json:"notes,omitempty"`
}

// Row names the section's "reading it" list refers to.
const (
	pathTCP       = "plain TCP"
	pathTLS       = "bare TLS 1.3 (crypto/tls)"
	pathTransport = "peerfs transport (TLS + coalescing)"
	pathCp        = "native cp (same disk)"
	pathDiskWrite = "disk write (a pull's O_DIRECT path)"
	pathDiskRead  = "disk read, cold (the owner's O_DIRECT path)"
	pathPullFirst = "peerfs pull, first (owner hashes)"
	pathPull      = "peerfs pull, again"
	pathMountRead = "peerfs mount, cold read"
)

func init() {
	register(&suite{
		name:  "link",
		usage: "[--size 1GiB] [--runs 3]",
		run:   runLink,
	})
}

// The link benchmark's work directory:
//
//	src/big.bin    the test file; alpha exports src/ read-only as share "bench"
//	mnt/           beta's mount of alpha:bench, for the cold read through the mount
//	cp-N, pull-N   the copies of run N, removed after each
//	disk-N         the disk write reference of run N, removed after it
//	alpha/, beta/  the daemons' homes
func runLink(ctx context.Context, o commonOptions) (sec *Section, err error) {
	keep := o.Dir != ""
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "peerfs-bench-")
		if err != nil {
			return nil, err
		}
		o.Dir = d
	}
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return nil, err
	}
	src := filepath.Join(o.Dir, "src")
	mnt := filepath.Join(o.Dir, "mnt")
	// Undone in reverse order, also after an error or a signal: the mount before the daemons,
	// and the work directory only once nothing is mounted in it.
	var undo []func()
	defer func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		if !keep {
			if mounted(mnt) {
				fmt.Fprintf(os.Stderr, "peerfs-bench: %s is still mounted; leaving %s\n", mnt, o.Dir)
			} else {
				os.RemoveAll(o.Dir)
			}
		}
	}()
	if mounted(mnt) {
		return nil, fmt.Errorf("%s is still mounted: unmount it first (fusermount3 -u)", mnt)
	}
	for _, d := range []string{src, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	file := filepath.Join(src, "big.bin")
	fmt.Fprintf(os.Stderr, "writing a %d MiB test file...\n", o.Size>>20)
	if err := writeRandom(file, o.Size); err != nil {
		return nil, err
	}
	peers, err := startPeers(ctx, o.Peerfs, o.Dir, src, true)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() {
		if err := peers.unmount(mnt); err != nil {
			fmt.Fprintln(os.Stderr, "peerfs-bench: unmounting peerfs:", err)
		}
		peers.stop()
	})

	rep := report{Machine: machine(), Size: o.Size, Runs: o.Runs}
	paths := []struct {
		name string
		run  func(context.Context, int) (sample, error)
	}{
		{pathTCP, func(context.Context, int) (sample, error) { return streamOnce(o.Size, tcpPair) }},
		{pathTLS, func(context.Context, int) (sample, error) { return streamOnce(o.Size, tlsPair) }},
		{pathTransport, func(context.Context, int) (sample, error) { return streamOnce(o.Size, transportPair) }},
		{pathCp, func(_ context.Context, i int) (sample, error) {
			return cpOnce(file, filepath.Join(o.Dir, fmt.Sprint("cp-", i)))
		}},
		{pathDiskWrite, func(_ context.Context, i int) (sample, error) {
			return diskWriteOnce(filepath.Join(o.Dir, fmt.Sprint("disk-", i)), o.Size)
		}},
		{pathDiskRead, func(context.Context, int) (sample, error) {
			s, note, err := diskReadOnce(file, o.Size)
			if note != "" && !slices.Contains(rep.Notes, note) {
				rep.Notes = append(rep.Notes, note)
			}
			return s, err
		}},
		{pathPullFirst, func(ctx context.Context, i int) (sample, error) {
			// A new ctime makes the owner forget the file's hash: this pull hashes it while
			// sending, as the first pull of a file does. The file's ctime is then more than a
			// second old, so the owner remembers the hash for the next row.
			if err := touchCtime(file); err != nil {
				return sample{}, err
			}
			time.Sleep(1100 * time.Millisecond)
			if err := warmFile(file); err != nil {
				return sample{}, err
			}
			return peers.pullOnce(ctx, filepath.Join(o.Dir, fmt.Sprint("pull-", i)), o.Size)
		}},
		{pathPull, func(ctx context.Context, i int) (sample, error) {
			if err := warmFile(file); err != nil {
				return sample{}, err
			}
			return peers.pullOnce(ctx, filepath.Join(o.Dir, fmt.Sprint("pull-", i)), o.Size)
		}},
	}
	if missing := fuseMissing(); missing != nil {
		fmt.Fprintf(os.Stderr, "%s skipped: %v\n", pathMountRead, missing)
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s skipped: %v", pathMountRead, missing))
	} else {
		paths = append(paths, struct {
			name string
			run  func(context.Context, int) (sample, error)
		}{pathMountRead, func(ctx context.Context, i int) (sample, error) {
			s, note, err := peers.mountReadOnce(ctx, mnt, file, o.Size)
			if note != "" && !slices.Contains(rep.Notes, note) {
				rep.Notes = append(rep.Notes, note)
			}
			return s, err
		}})
	}
	for _, p := range paths {
		rep.Paths = append(rep.Paths, pathResult{Name: p.name})
	}
	for i := 0; i < o.Runs; i++ {
		for j, p := range paths {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			s, err := p.run(ctx, i)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.name, err)
			}
			fmt.Fprintf(os.Stderr, "run %d %-38s %8.0f MiB/s\n", i+1, p.name, mibs(o.Size, s.Seconds))
			rep.Paths[j].Samples = append(rep.Paths[j].Samples, s)
		}
	}
	printReport(os.Stdout, rep)
	return linkSection(rep), nil
}

// touchCtime gives file a new ctime without changing it otherwise (a chmod to its own mode).
func touchCtime(file string) error {
	fi, err := os.Stat(file)
	if err != nil {
		return err
	}
	return os.Chmod(file, fi.Mode().Perm())
}

// fuseMissing says what the mount rows need and this machine lacks, or nil.
func fuseMissing() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("/dev/fuse is missing (modprobe fuse)")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		return fmt.Errorf("fusermount3 is missing (apt-get install fuse3)")
	}
	return nil
}

// mountReadOnce reads the owner's file through a fresh mount of alpha's share: beta is
// restarted with an empty chunk cache and mounts again, the owner's page cache for the file
// is dropped, and dd reads the file with 1 MiB reads in a process of its own. CPU is both
// daemons' and dd's (the kernel's copies to the reader count in dd's system time). The note
// is dropFileCache's, when the owner's copy could not be evicted.
func (p *peers) mountReadOnce(ctx context.Context, mnt, file string, size int64) (s sample, note string, err error) {
	if err := p.unmount(mnt); err != nil {
		return s, "", err
	}
	if err := p.restartBeta(ctx, true); err != nil {
		return s, "", err
	}
	if err := p.mount(mnt); err != nil {
		return s, "", err
	}
	defer func() {
		if uerr := p.unmount(mnt); err == nil {
			err = uerr
		}
	}()
	if note, err = dropFileCache(file); err != nil {
		return s, "", err
	}
	cpu0 := p.cpu()
	r, err := ddRead(ctx, filepath.Join(mnt, filepath.Base(file)))
	if err != nil {
		return s, note, err
	}
	if r.bytes != size {
		return s, note, fmt.Errorf("read %d bytes through the mount, want %d", r.bytes, size)
	}
	return sample{Seconds: r.seconds, CPUSeconds: p.cpu() - cpu0 + r.cpu}, note, nil
}

// ddResult is one read of a file by dd.
type ddResult struct {
	seconds float64 // wall time of the dd process, start-up included (about a millisecond)
	cpu     float64 // dd's user+system time
	bytes   int64   // what dd says it copied
}

// ddRead reads path to the end with 1 MiB reads in a dd process. A reader of its own keeps
// the Go runtime's preemption signals off the FUSE requests (see mountBench.create) and
// gives its CPU time apart from this process's.
func ddRead(ctx context.Context, path string) (ddResult, error) {
	cmd := exec.CommandContext(ctx, "dd", "if="+path, "of=/dev/null", "bs=1M")
	cmd.Env = append(os.Environ(), "LC_ALL=C") // "N bytes ... copied" in a known language
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return ddResult{}, fmt.Errorf("dd if=%s: %v %s", path, err, strings.TrimSpace(stderr.String()))
	}
	r := ddResult{seconds: time.Since(t0).Seconds()}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	r.cpu = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if _, err := fmt.Sscan(lines[len(lines)-1], &r.bytes); err != nil {
		return r, fmt.Errorf("dd if=%s: unexpected output %q", path, stderr.String())
	}
	return r, nil
}

func mibs(size int64, secs float64) float64 { return float64(size) / (1 << 20) / secs }

func median(xs []float64) (med, lo, hi float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// linkRow is one path's figures as the tables show them.
type linkRow struct {
	name         string
	med, lo, hi  float64 // MiB/s
	cpu          float64 // CPU seconds per GiB, median
	vsTCP, vsTLS float64 // median over the plain TCP and bare TLS medians
}

func linkRows(r report) []linkRow {
	var rows []linkRow
	for _, p := range r.Paths {
		var rate, cpu []float64
		for _, s := range p.Samples {
			rate = append(rate, mibs(r.Size, s.Seconds))
			cpu = append(cpu, s.CPUSeconds/(float64(r.Size)/(1<<30)))
		}
		if len(rate) == 0 {
			continue
		}
		row := linkRow{name: p.Name}
		row.med, row.lo, row.hi = median(rate)
		row.cpu, _, _ = median(cpu)
		rows = append(rows, row)
	}
	tcp, tls := findLinkRow(rows, pathTCP), findLinkRow(rows, pathTLS)
	for i := range rows {
		if tcp != nil {
			rows[i].vsTCP = rows[i].med / tcp.med
		}
		if tls != nil {
			rows[i].vsTLS = rows[i].med / tls.med
		}
	}
	return rows
}

func findLinkRow(rows []linkRow, name string) *linkRow {
	for i := range rows {
		if rows[i].name == name {
			return &rows[i]
		}
	}
	return nil
}

// linkTable is the table of both the terminal report and the section.
func linkTable(r report) string {
	var b strings.Builder
	b.WriteString("| path | MiB/s, median (min-max) | CPU s/GiB | vs plain TCP | vs bare TLS |\n|---|---|---|---|---|\n")
	for _, row := range linkRows(r) {
		fmt.Fprintf(&b, "| %s | %.0f (%.0f-%.0f) | %.2f | %.2f | %.2f |\n", row.name, row.med, row.lo, row.hi, row.cpu, row.vsTCP, row.vsTLS)
	}
	return b.String()
}

// peakRSS is the larger daemon's peak RSS over all pulls, 0 if none was sampled.
func (r report) peakRSS() float64 {
	hi := 0.0
	for _, p := range r.Paths {
		for _, s := range p.Samples {
			hi = max(hi, s.RSSMiB)
		}
	}
	return hi
}

func printReport(w io.Writer, r report) {
	fmt.Fprintf(w, "\n%s; %d MiB per run, %d runs, medians (min-max)\n\n", r.Machine, r.Size>>20, r.Runs)
	fmt.Fprint(w, linkTable(r))
	if rss := r.peakRSS(); rss > 0 {
		fmt.Fprintf(w, "\npeak daemon RSS during the pulls: %.0f MiB\n", rss)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// linkSection is the link benchmark's part of BENCHMARKS.md: what each row is, the table,
// and what the figures say, computed from them.
func linkSection(r report) *Section {
	var b strings.Builder
	b.WriteString(`What each row measures, all on loopback:

- **plain TCP**: 1 MiB writes into a socket, read and discarded on the other end (one process).
- **bare TLS 1.3 (crypto/tls)**: the same over Go's crypto/tls with exactly the configuration
  peerfs uses (TLS 1.3, X25519MLKEM768, Ed25519 certificates).
- **peerfs transport**: the same TLS through ` + "`internal/transport`" + `, which gathers the 16 KiB
  records of a write into 256 KiB socket writes.
- **native cp (same disk)**: ` + "`cp`" + ` of the test file to a new file beside it: the cost of
  reading and writing the file, which any copy pays.
- **disk write (a pull's O_DIRECT path)**: the test size written to a new file the way a pull
  writes what it receives: blocks reserved, then 1 MiB writes straight to the disk
  (` + "`internal/directio`" + `). No pull can write its file faster than this.
- **disk read, cold (the owner's O_DIRECT path)**: the test file, its page cache dropped,
  read the way the owner reads a file it sends: 1 MiB reads straight from the disk. No cold
  read through a mount can be faster than this: on loopback both peers share this disk.
- **peerfs pull, first**: two real ` + "`peerfs daemon`" + ` processes; ` + "`peerfs pull`" + ` of the file from the
  CLI, timed end to end (CLI start-up, stream, BLAKE3 on both sides, rename). The owner's
  copy is in its page cache (read once, untimed): on loopback its disk is also the puller's,
  and two devices never share one disk's reads and writes (the disk rows give each alone).
  A chmod before it gives the file a new ctime, so the owner hashes it as it sends it, as
  for any file it has not sent whole before.
- **peerfs pull, again**: the same pull right after: the owner remembers the hash of the
  unchanged file (same device, inode, size, mtime and ctime) and only reads it; the puller
  still hashes what it receives and compares.
- **peerfs mount, cold read**: beta mounts alpha's read-only share; before each run beta is
  restarted with an empty chunk cache and the owner's page cache for the file is dropped; ` + "`dd`" + `
  reads the file with 1 MiB reads.

CPU s/GiB counts both ends (both run on the same cores): for the pull and the mount, both
daemons' user+system time, plus dd's for the mount.

`)
	fmt.Fprintf(&b, "%d MiB per run, %d runs, medians (min-max):\n\n", r.Size>>20, r.Runs)
	b.WriteString(linkTable(r))
	if rss := r.peakRSS(); rss > 0 {
		fmt.Fprintf(&b, "\nPeak daemon RSS during the pulls: %.0f MiB.\n", rss)
	}
	if reading := linkReading(r); len(reading) > 0 {
		b.WriteString("\nReading it:\n\n")
		for _, l := range reading {
			b.WriteString("- " + l + "\n")
		}
	}
	return &Section{
		Title:    fmt.Sprintf("Layers: %s over TCP, TLS, the peerfs transport, a pull and the mount", spelledSize(r.Size)),
		Markdown: b.String(),
		Notes:    r.Notes,
		Raw:      r,
	}
}

// linkReading derives the "reading it" list from the figures.
func linkReading(r report) []string {
	rows := linkRows(r)
	tcp, tls, tr := findLinkRow(rows, pathTCP), findLinkRow(rows, pathTLS), findLinkRow(rows, pathTransport)
	cp, pull, mnt := findLinkRow(rows, pathCp), findLinkRow(rows, pathPull), findLinkRow(rows, pathMountRead)
	first := findLinkRow(rows, pathPullFirst)
	dw, dr := findLinkRow(rows, pathDiskWrite), findLinkRow(rows, pathDiskRead)
	var out []string
	if pull != nil && tcp != nil && tls != nil {
		out = append(out, fmt.Sprintf("**peerfs pull: %.0f MiB/s**, %.0f%% of plain TCP and %.0f%% of bare TLS, at %.2f CPU s/GiB.",
			pull.med, 100*pull.vsTCP, 100*pull.vsTLS, pull.cpu))
	}
	if pull != nil && dw != nil && tls != nil {
		head := "The disk's ceiling for the pull"
		if pull.med >= 0.85*dw.med {
			head = "The disk bounds the pull"
		}
		l := fmt.Sprintf("**%s:** this disk takes the pull's O_DIRECT writes at %.0f MiB/s (%.0f%% of bare TLS), and the pull reaches %.0f%% of that",
			head, dw.med, 100*dw.vsTLS, 100*pull.med/dw.med)
		if dw.med < tls.med {
			l += "; no pull to this disk can reach the link's rate"
		}
		out = append(out, l+".")
	}
	if first != nil && pull != nil && tls != nil {
		out = append(out, fmt.Sprintf("**The first pull of a file: %.0f MiB/s** (%.0f%% of bare TLS) at %.2f CPU s/GiB: the owner's BLAKE3 costs %.2f CPU s/GiB more than a pull whose hash it remembers.",
			first.med, 100*first.vsTLS, first.cpu, first.cpu-pull.cpu))
	}
	if pull != nil && tr != nil && cp != nil {
		floor := tr.cpu + cp.cpu
		l := fmt.Sprintf("**The pull against a copy:** the link (%.2f s/GiB, transport row) plus the native cp of the file (%.2f, cp row) come to %.2f s/GiB; the pull spends %.2f, BLAKE3 on both sides included",
			tr.cpu, cp.cpu, floor, pull.cpu)
		if pull.cpu < floor {
			// cp fills new page-cache pages; the pull writes its file with O_DIRECT.
			l += fmt.Sprintf(", %.0f%% less: cp writes through the page cache, whose new pages cost this machine dearly (see the top of this file), while the pull writes its file straight to the disk", 100*(1-pull.cpu/floor))
		} else {
			l += fmt.Sprintf(", %.0f%% more", 100*(pull.cpu/floor-1))
		}
		out = append(out, l+".")
	}
	if mnt != nil && tcp != nil {
		l := fmt.Sprintf("**Cold read through the mount: %.0f MiB/s**, %.0f%% of plain TCP, at %.2f CPU s/GiB", mnt.med, 100*mnt.vsTCP, mnt.cpu)
		if pull != nil {
			l += fmt.Sprintf("; %.2fx the pull's rate", mnt.med/pull.med)
		}
		if dr != nil {
			l += fmt.Sprintf("; %.0f%% of what the owner's disk gives cold (%.0f MiB/s, disk read row)", 100*mnt.med/dr.med, dr.med)
		}
		out = append(out, l+".")
	}
	if tr != nil && tls != nil && tls.cpu > 0 {
		out = append(out, fmt.Sprintf("**Coalescing TLS records:** the transport moves %.2fx what bare crypto/tls does, at %+.0f%% CPU per GiB.",
			tr.med/tls.med, 100*(tr.cpu/tls.cpu-1)))
	}
	if r.Runs > 1 {
		var wide *linkRow
		for i := range rows {
			if rows[i].lo > 0 && (wide == nil || rows[i].hi/rows[i].lo > wide.hi/wide.lo) {
				wide = &rows[i]
			}
		}
		if wide != nil && wide.hi/wide.lo > 1.5 {
			out = append(out, fmt.Sprintf("**%s swings the most** (%.0f-%.0f MiB/s, %.1fx between runs): read its median with care.",
				wide.name, wide.lo, wide.hi, wide.hi/wide.lo))
		}
	}
	return out
}

// spelledSize writes a size the way the flags take it: 1 GiB, 256 MiB, 4 KiB.
func spelledSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				model = strings.TrimSpace(l[strings.Index(l, ":")+1:])
				break
			}
		}
	}
	var u syscall.Utsname
	syscall.Uname(&u)
	rel := make([]byte, 0, 65)
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	return fmt.Sprintf("%s, %d cores, Linux %s, %s", model, runtime.NumCPU(), rel, runtime.Version())
}

func writeRandom(path string, size int64) error {
	if fi, err := os.Stat(path); err == nil && fi.Size() == size {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	r := rand.NewChaCha8([32]byte{42})
	if _, err := io.CopyN(f, r, size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// cpuSelf returns this process's user+system CPU time.
func cpuSelf() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

type pairFunc func() (w, r net.Conn, err error)

// streamOnce writes size bytes from a 1 MiB buffer on w and reads them on r, both ends in
// this process, and times it; CPU covers both ends.
func streamOnce(size int64, pair pairFunc) (sample, error) {
	w, r, err := pair()
	if err != nil {
		return sample{}, err
	}
	defer w.Close()
	defer r.Close()
	buf := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{1}).Read(buf)
	done := make(chan error, 1)
	go func() {
		rb := make([]byte, 1<<20)
		_, err := io.CopyBuffer(io.Discard, io.LimitReader(r, size), rb)
		done <- err
	}()
	cpu0, t0 := cpuSelf(), time.Now()
	for n := int64(0); n < size; n += int64(len(buf)) {
		if _, err := w.Write(buf[:min(int64(len(buf)), size-n)]); err != nil {
			return sample{}, err
		}
	}
	if err := <-done; err != nil {
		return sample{}, err
	}
	return sample{Seconds: time.Since(t0).Seconds(), CPUSeconds: cpuSelf() - cpu0}, nil
}

func tcpPair() (net.Conn, net.Conn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, nil, err
	}
	r := <-acc
	if r == nil {
		w.Close()
		return nil, nil, fmt.Errorf("accept failed")
	}
	return w, r, nil
}

var ids = func() [2]*identity.Identity {
	a, _ := identity.Generate()
	b, _ := identity.Generate()
	return [2]*identity.Identity{a, b}
}()

// trustAll trusts the two identities of the link benchmarks.
func trustAll() []identity.DeviceID { return []identity.DeviceID{ids[0].ID, ids[1].ID} }

// tlsPair is crypto/tls as it comes, with the configuration peerfs uses.
func tlsPair() (net.Conn, net.Conn, error) {
	w, r, err := tcpPair()
	if err != nil {
		return nil, nil, err
	}
	client := tls.Client(w, transport.ClientTLS(&transport.Config{Identity: ids[0], Trusted: trustAll}, ids[1].ID))
	server := tls.Server(r, transport.ServerTLS(&transport.Config{Identity: ids[1], Trusted: trustAll}))
	errc := make(chan error, 1)
	go func() { errc <- server.Handshake() }()
	if err := client.Handshake(); err != nil {
		return nil, nil, err
	}
	if err := <-errc; err != nil {
		return nil, nil, err
	}
	if st := client.ConnectionState(); st.CurveID != tls.X25519MLKEM768 {
		return nil, nil, fmt.Errorf("negotiated %v", st.CurveID)
	}
	return client, server, nil
}

// transportPair is peerfs's transport: the same TLS, verified, with record coalescing.
func transportPair() (net.Conn, net.Conn, error) {
	ln, err := transport.Listen("127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			acc <- nil
			return
		}
		c, err := transport.Server(context.Background(), raw, &transport.Config{Identity: ids[1], Trusted: trustAll})
		if err != nil {
			acc <- nil
			return
		}
		acc <- c
	}()
	w, err := transport.Dial(context.Background(), ln.Addr().String(), &transport.Config{Identity: ids[0], Trusted: trustAll}, ids[1].ID)
	if err != nil {
		return nil, nil, err
	}
	r := <-acc
	if r == nil {
		w.Close()
		return nil, nil, fmt.Errorf("transport accept failed")
	}
	return w, r, nil
}

func cpOnce(src, dst string) (sample, error) {
	defer os.Remove(dst)
	cmd := exec.Command("cp", src, dst)
	t0 := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return sample{}, fmt.Errorf("cp: %v %s", err, out)
	}
	secs := time.Since(t0).Seconds()
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return sample{Seconds: secs, CPUSeconds: float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9}, nil
}
