// Command peerfs-bench measures peerfs against references taken in the same run, on loopback,
// and turns the results into BENCHMARKS.md:
//
//	peerfs-bench SUITE [common flags] [suite flags]
//	peerfs-bench report [--results bench-results] [--markdown BENCHMARKS.md] [--plots docs/bench]
//
// Each suite prints its tables on stdout and, with --out FILE, writes them as a JSON Section
// (suite.go): Markdown, plots and every sample. The suites, one file each:
//
//   - link: one --size file over plain TCP, bare TLS 1.3 (crypto/tls with peerfs's
//     configuration), peerfs's transport (the same with record coalescing), a native cp, a real
//     "peerfs pull" between two daemons and a cold read through a peerfs mount; MiB/s, CPU
//     seconds per GiB of both ends, ratios to plain TCP and bare TLS, the daemons' peak RSS.
//   - mount: five workloads through a peerfs mount, through sshfs (an sshd the benchmark starts
//     on 127.0.0.1) and on the native disk: cold and warm reads of a --size file, a cp into the
//     mount, git clone of a generated --files repository, --creates files of 4 KiB.
//   - blocksize, patterns, meta, tree: the block-size sweep, access patterns, metadata and small
//     I/O, and the compilebench-like tree workload (see their files).
//   - tune: each of the mount's tuning flags swept alone on the workload it affects, for the
//     choice of peerfs's defaults (tune.go).
//   - wan: the key workloads with round-trip time and a rate limit between the nodes, through
//     an in-process toxiproxy that carries peerfs and sshfs alike (wan.go).
//   - reach: a stream direct and through "peerfs relay serve" on loopback (reach.go), then
//     link-up, pulls and a cut direct path with real daemons in a netlab network of NAT
//     routers (reach_lab.go; root only, skipped with a message otherwise).
//
// "report" reads every JSON section of a directory, draws their plots as PNG files and
// rewrites the part of BENCHMARKS.md between <!-- results:begin --> and <!-- results:end -->.
//
// Common flags: --size (default 1GiB), --runs (default 3; medians with min and max are
// reported), --dir (work directory, default a new one under $TMPDIR, removed at the end),
// --peerfs (the binary, default bin/peerfs), --out (the JSON section), --quick (tiny sizes
// and one run, so a test can run a suite in seconds; flags given explicitly still win).
//
// Every suite undoes what it started (mounts, daemons, sshd, proxies) also on ^C, and exits
// 130 then.
//
// With PEERFS_BENCH_PROFILE_DIR set, the daemons write CPU profiles there: alpha.cpu and
// beta.cpu, and beta-2.cpu, beta-3.cpu... for the daemons a suite restarts to empty the cache
// (go tool pprof bin/peerfs DIR/beta.cpu).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// usage lists every registered suite.
func usage() string {
	u := "usage:\n"
	for _, n := range suiteNames() {
		u += "  peerfs-bench " + n + " " + suites[n].usage + "\n"
	}
	u += "  " + reportUsage + "\n"
	return u + "common flags: [--size N] [--runs N] [--dir DIR] [--peerfs BIN] [--out FILE] [--quick]"
}

// commonOptions are the flags every benchmark takes.
type commonOptions struct {
	Size   int64
	Runs   int
	Dir    string
	Peerfs string
	Out    string
	Quick  bool
	// Command is the command line as given, for the report.
	Command string
}

// Sizes --quick uses: large enough to cross several 256 KiB cache chunks and 1 MiB FUSE
// requests, small enough that both benchmarks finish in seconds.
const (
	quickSize  = 16 << 20
	quickRuns  = 1
	quickFiles = 100
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage())
		os.Exit(2)
	}
	verb := os.Args[1]
	if verb == "create-files" && len(os.Args) == 4 { // the mount benchmark's child; see createFiles
		var n int
		fmt.Sscan(os.Args[3], &n)
		if err := createFiles(os.Args[2], n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if verb == "report" { // reads results, measures nothing: its own flags only
		os.Exit(reportMain(os.Args[2:]))
	}
	fs := flag.NewFlagSet(verb, flag.ExitOnError)
	fs.Usage = func() { fmt.Fprintln(os.Stderr, usage()); fs.PrintDefaults() }
	var o commonOptions
	size := fs.String("size", "1GiB", "bytes per file and run (KiB, MiB, GiB suffixes)")
	fs.IntVar(&o.Runs, "runs", 3, "runs per path; medians are reported")
	fs.StringVar(&o.Dir, "dir", "", "work directory (default: a new one under $TMPDIR, removed at the end)")
	fs.StringVar(&o.Peerfs, "peerfs", "bin/peerfs", "the peerfs binary to benchmark")
	fs.StringVar(&o.Out, "out", "", "also write the results as JSON to this file")
	fs.BoolVar(&o.Quick, "quick", false, "tiny sizes and one run, to check the harness (16 MiB, 100 files)")
	st := suites[verb]
	if st == nil {
		fmt.Fprintln(os.Stderr, usage())
		os.Exit(2)
	}
	if st.flags != nil {
		st.flags(fs)
	}
	fs.Parse(os.Args[2:])
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.Quick {
		if !set["size"] {
			*size = fmt.Sprint(quickSize)
		}
		if !set["runs"] {
			o.Runs = quickRuns
		}
		if st.quick != nil {
			st.quick(set)
		}
	}
	var err error
	if o.Size, err = parseSize(*size); err != nil || o.Size <= 0 || o.Runs < 1 {
		fmt.Fprintf(os.Stderr, "peerfs-bench: bad --size %q or --runs %d\n", *size, o.Runs)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	o.Command = "peerfs-bench " + strings.Join(os.Args[1:], " ")
	var sec *Section
	sec, err = st.run(ctx, o)
	if err == nil && sec != nil && o.Out != "" {
		err = writeSection(o.Out, verb, o, sec)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "peerfs-bench: interrupted; what it had started is stopped and unmounted")
		stop()
		os.Exit(130)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerfs-bench:", err)
		stop()
		os.Exit(1)
	}
}

func parseSize(s string) (int64, error) {
	var n int64
	var unit string
	if _, err := fmt.Sscanf(s, "%d%s", &n, &unit); err != nil && unit == "" {
		if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
			return 0, fmt.Errorf("bad size %q", s)
		}
	}
	switch unit {
	case "", "B":
	case "KiB", "K", "k":
		n <<= 10
	case "MiB", "M", "m":
		n <<= 20
	case "GiB", "G", "g":
		n <<= 30
	default:
		return 0, fmt.Errorf("bad size unit in %q", s)
	}
	return n, nil
}

// writeSection fills the fields every section shares and writes it as JSON.
func writeSection(path, verb string, o commonOptions, sec *Section) error {
	sec.Suite = verb
	if sec.Command == "" {
		sec.Command = o.Command
	}
	if sec.Machine == "" {
		sec.Machine = machine()
	}
	if sec.Date == "" {
		sec.Date = time.Now().Format("2006-01-02")
	}
	b, err := json.MarshalIndent(sec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
