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

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/fusefs"
)

// The WAN benchmark: the key workloads of the mount with round-trip time and a rate limit
// between the two nodes, for peerfs and for sshfs over the same kind of link.
//
// This kernel has no netem, so the link is a TCP proxy in this process (toxiproxy, wan_proxy.go)
// with a latency toxic of half the round-trip time on each direction and a bandwidth toxic of
// --rate on each direction. beta's peer entry for alpha points at a proxy whose upstream is
// alpha's listener; sshfs connects to a proxy built the same way whose upstream is the
// benchmark's sshd. "loopback" is the reference without any proxy.
//
// Work directory:
//
//	owner/        alpha's share "bench": big.bin (--wan-size), tree/ (--tree-files small files),
//	              and the clones and created files of the workloads, removed after each target
//	local/repo    the git repository that is cloned (outside every mount)
//	mnt-peerfs/   beta's mount of alpha:bench
//	mnt-sshfs/    sshfs mount of owner/
//	ssh/          sshd's config, keys and pid file
//	alpha/, beta/ the daemons' homes
//
// One run takes each condition in turn and, in it, each target (the order rotates from run
// to run); a target is set up cold for every condition: peerfs gets a beta daemon restarted
// with an empty chunk cache, its alpha entry pointed at the condition's proxy, and a fresh
// mount; sshfs a fresh mount through the condition's proxy. Then four workloads run: a cold
// read of big.bin, find plus grep -r over tree/ (the owner's page cache for both dropped
// first), a git clone into the mount and the creation of --creates files of 4 KiB.

type wanOptions struct {
	commonOptions
	SizeFlag  string // --wan-size as given
	FileSize  int64  // parsed --wan-size (the common --size is not used)
	RTTFlag   string // --rtt as given
	RTTs      []int  // added round-trip times in ms, each a proxied condition
	RateMbit  int    // --rate, per direction; 0 means no limit
	TreeFiles int
	Files     int
	Creates   int
	NoSSHFS   bool
	NoJournal bool // skip the journaling mount (--writes journal)
	NoSync    bool // skip peerfs with --writes sync
}

// tPeerfsJournal is peerfs mounted with --writes journal: changes complete in the mount's
// journal and reach the owner without waits.
const tPeerfsJournal = "peerfs-journal"

// Defaults, with the reason for each:
//
//   - --wan-size 256 MiB, not --size's 1 GiB: at 50 ms a reader with few requests in flight
//     (sshfs) gets a few MiB/s, so a 1 GiB cold read would take minutes per run on its own;
//     256 MiB is still 16 times the mount's 16 MiB readahead window, long enough for the
//     window to reach its steady state;
//   - --rate 1000 Mbit/s per direction: a gigabit link, common between a desktop, a laptop and
//     a server, and below what both targets reach on loopback (peerfs and sshfs read at more
//     than 119 MiB/s there, BENCHMARKS.md "Mount"), so with the proxy the link and its round
//     trips set the pace, not the CPU; the proxy itself costs little CPU at that rate;
//   - --rtt 0,10,50: 0 (proxy and rate limit, no latency) separates the proxy's and the rate
//     limit's cost from the latency's; 10 ms is a link within a region, 50 ms across a
//     continent.
const (
	wanDefaultSize  = "256MiB"
	wanDefaultRTTs  = "0,10,50"
	wanDefaultRate  = 1000
	wanDefaultTree  = 10000
	wanQuickTree    = 200
	wanQuickRTTs    = "10"
	wanLoopback     = "loopback"
	wanTreeNeedle   = "peerfs-needle"
	wanNeedleEveryN = 100 // one file in a hundred holds the needle grep looks for
)

// Workload keys, in the order they run.
const (
	wColdRead = "cold_read"
	wFindGrep = "find_grep"
	wClone    = "git_clone"
	wCreate   = "create"
)

// wanCondition is one link between the nodes.
type wanCondition struct {
	Name     string `json:"name"`
	Proxied  bool   `json:"proxied"`
	RTTms    int    `json:"added_rtt_ms"`        // added round trip, half of it each way
	RateMbit int    `json:"rate_mbit,omitempty"` // per direction
	// EchoRTTms is the round trip of one byte through a proxy of this condition to an echo
	// server, median of several: it checks the toxics add what they claim.
	EchoRTTms float64 `json:"echo_rtt_ms,omitempty"`
	// PeerfsRTTms is beta's keepalive round trip to alpha after each connect ("peerfs status").
	PeerfsRTTms []float64 `json:"peerfs_rtt_ms,omitempty"`

	peerfsProxy, sshfsProxy *wanProxy
}

// wanSample is one timed workload.
type wanSample struct {
	Seconds     float64 `json:"seconds"`
	FindSeconds float64 `json:"find_seconds,omitempty"` // find_grep: the find alone
	GrepSeconds float64 `json:"grep_seconds,omitempty"` // find_grep: the grep alone
	// From "peerfs stats" around the workload (peerfs only): requests that waited for the
	// owner, and READs sent to it.
	RoundTrips int64 `json:"round_trips,omitempty"`
	OwnerReads int64 `json:"owner_reads,omitempty"`
	// DrainSeconds (peerfs-journal, clone and create): from the workload's end until an fsync
	// of the mount returned, everything it wrote durable on the owner.
	DrainSeconds float64 `json:"drain_seconds,omitempty"`
}

type wanResult struct {
	Workload  string      `json:"workload"`
	Target    string      `json:"target"`
	Condition string      `json:"condition"`
	Samples   []wanSample `json:"samples"`
}

type wanReport struct {
	Machine   string `json:"machine"`
	Size      int64  `json:"size"`
	TreeFiles int    `json:"tree_files"`
	TreeDirs  int    `json:"tree_dirs"`
	// TreeInline counts the tree's files small enough for peerfs's default inline threshold
	// (fusefs.DefaultInline): their contents come with the directory listing.
	TreeInline int             `json:"tree_inline"`
	Files      int             `json:"repo_files"`
	Creates    int             `json:"creates"`
	Runs       int             `json:"runs"`
	RateMbit   int             `json:"rate_mbit"`
	SSHFS      string          `json:"sshfs_options,omitempty"`
	Conditions []*wanCondition `json:"conditions"`
	Results    []*wanResult    `json:"results"`
	Notes      []string        `json:"notes,omitempty"`
}

func (r *wanReport) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	for _, n := range r.Notes {
		if n == s {
			return
		}
	}
	r.Notes = append(r.Notes, s)
}

func (r *wanReport) result(workload, target, cond string) *wanResult {
	for _, x := range r.Results {
		if x.Workload == workload && x.Target == target && x.Condition == cond {
			return x
		}
	}
	x := &wanResult{Workload: workload, Target: target, Condition: cond}
	r.Results = append(r.Results, x)
	return x
}

func init() {
	var wo wanOptions
	register(&suite{
		name:  "wan",
		usage: "[--wan-size 256MiB] [--rtt 0,10,50] [--rate 1000] [--tree-files 10000] [--files 1000] [--creates 1000] [--no-sshfs] [--no-sync] [--no-journal]",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&wo.SizeFlag, "wan-size", wanDefaultSize, "size of the file the cold read reads (--size is not used: see BENCHMARKS.md)")
			fs.StringVar(&wo.RTTFlag, "rtt", wanDefaultRTTs, "added round-trip times in ms, comma-separated; each is a condition behind the proxy (loopback always runs too)")
			fs.IntVar(&wo.RateMbit, "rate", wanDefaultRate, "the proxy's rate limit per direction in Mbit/s (0: none)")
			fs.IntVar(&wo.TreeFiles, "tree-files", wanDefaultTree, "small files in the tree find and grep -r walk")
			fs.IntVar(&wo.Files, "files", 1000, "files in the repository that git clone copies")
			fs.IntVar(&wo.Creates, "creates", 1000, "files of 4 KiB the create workload makes")
			fs.BoolVar(&wo.NoSSHFS, "no-sshfs", false, "skip sshfs")
			fs.BoolVar(&wo.NoJournal, "no-journal", false, "skip the journaling mount (peerfs mount --writes journal)")
			fs.BoolVar(&wo.NoSync, "no-sync", false, "skip peerfs mounted with --writes sync (the journaling mount's runs alone are much shorter at 50 ms)")
		},
		quick: func(set map[string]bool) {
			if !set["wan-size"] {
				wo.SizeFlag = fmt.Sprint(quickSize)
			}
			if !set["rtt"] {
				wo.RTTFlag = wanQuickRTTs
			}
			if !set["tree-files"] {
				wo.TreeFiles = wanQuickTree
			}
			if !set["files"] {
				wo.Files = quickFiles
			}
			if !set["creates"] {
				wo.Creates = quickFiles
			}
		},
		run: func(ctx context.Context, o commonOptions) (*Section, error) {
			wo.commonOptions = o
			var err error
			if wo.FileSize, err = parseSize(wo.SizeFlag); err != nil || wo.FileSize <= 0 {
				return nil, fmt.Errorf("bad --wan-size %q", wo.SizeFlag)
			}
			if wo.RTTs, err = parseRTTs(wo.RTTFlag); err != nil {
				return nil, err
			}
			if wo.RateMbit < 0 || wo.TreeFiles < 1 || wo.Files < 1 || wo.Creates < 1 {
				return nil, fmt.Errorf("--rate, --tree-files, --files and --creates must be positive")
			}
			return runWAN(ctx, wo)
		},
	})
}

// parseRTTs parses "0,10,50" into milliseconds.
func parseRTTs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		ms, err := strconv.Atoi(strings.TrimSuffix(f, "ms"))
		if err != nil || ms < 0 || ms > 10000 || slices.Contains(out, ms) {
			return nil, fmt.Errorf("bad --rtt %q: want distinct milliseconds, such as 0,10,50", s)
		}
		out = append(out, ms)
	}
	return out, nil
}

// wanBench holds one benchmark's state.
type wanBench struct {
	o         wanOptions
	rep       *wanReport
	owner     string
	bigOwner  string
	tree      string // owner/tree
	repo      string
	greps     int // files of the tree that hold the needle
	peers     *peers
	alphaAddr string // alpha's listener, the peerfs proxies' upstream
	alphaID   string
	ssh       *sshServer
}

// wanTarget is peerfs or sshfs, set up afresh for each condition.
type wanTarget struct {
	name     string
	dir      string
	setup    func(context.Context, *wanCondition) error
	teardown func() error
}

func runWAN(ctx context.Context, o wanOptions) (sec *Section, err error) {
	if missing := fuseMissing(); missing != nil {
		return nil, fmt.Errorf("the WAN benchmark needs FUSE: %w", missing)
	}
	keep := o.Dir != ""
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "peerfs-bench-wan-")
		if err != nil {
			return nil, err
		}
		o.Dir = d
	}
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return nil, err
	}
	b := &wanBench{
		o: o,
		rep: &wanReport{Machine: machine(), Size: o.FileSize, TreeFiles: o.TreeFiles, Files: o.Files,
			Creates: o.Creates, Runs: o.Runs, RateMbit: o.RateMbit},
		owner: filepath.Join(o.Dir, "owner"),
		repo:  filepath.Join(o.Dir, "local", "repo"),
	}
	b.bigOwner = filepath.Join(b.owner, "big.bin")
	b.tree = filepath.Join(b.owner, "tree")
	peerfsMnt := filepath.Join(o.Dir, "mnt-peerfs")
	journalMnt := filepath.Join(o.Dir, "mnt-peerfs-journal")
	sshfsMnt := filepath.Join(o.Dir, "mnt-sshfs")

	// Undone in reverse order, also after an error or a signal: the mounts first, then sshd
	// and the daemons, then the proxies (which die with this process anyway).
	var undo []func()
	defer func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		if !keep {
			if mounted(peerfsMnt) || mounted(journalMnt) || mounted(sshfsMnt) {
				fmt.Fprintf(os.Stderr, "peerfs-bench: a mount is still in place; leaving %s\n", o.Dir)
			} else {
				os.RemoveAll(o.Dir)
			}
		}
	}()
	if mounted(peerfsMnt) || mounted(journalMnt) || mounted(sshfsMnt) {
		return nil, fmt.Errorf("%s, %s or %s is still mounted: unmount it first (fusermount3 -u)", peerfsMnt, journalMnt, sshfsMnt)
	}
	os.RemoveAll(b.owner) // outputs of an interrupted run in a --dir
	for _, d := range []string{b.owner, filepath.Dir(b.repo), peerfsMnt, journalMnt, sshfsMnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(os.Stderr, "writing a %d MiB test file, a %d-file tree and a %d-file git repository...\n",
		o.FileSize>>20, o.TreeFiles, o.Files)
	if err := writeRandom(b.bigOwner, o.FileSize); err != nil {
		return nil, err
	}
	if b.rep.TreeDirs, b.rep.TreeInline, b.greps, err = makeWANTree(b.tree, o.TreeFiles); err != nil {
		return nil, err
	}
	if err := makeRepo(ctx, b.repo, o.Files); err != nil {
		return nil, err
	}

	proxies := newWANProxies()
	undo = append(undo, proxies.close)
	if b.peers, err = startPeers(ctx, o.Peerfs, o.Dir, b.owner, false); err != nil {
		return nil, err
	}
	undo = append(undo, func() {
		for _, d := range []string{peerfsMnt, journalMnt} {
			if err := b.peers.unmount(d); err != nil {
				fmt.Fprintln(os.Stderr, "peerfs-bench: unmounting peerfs:", err)
			}
		}
		b.peers.stop()
		b.peers.reportLog()
	})
	if b.alphaAddr, err = b.peers.waitListen(ctx, b.peers.homeA); err != nil {
		return nil, err
	}
	id, err := b.peers.cli(b.peers.homeA, "id")
	if err != nil {
		return nil, err
	}
	b.alphaID = strings.TrimSpace(string(id))

	peerfsTarget := func(name, dir string, flags ...string) *wanTarget {
		return &wanTarget{
			name: name, dir: dir,
			setup: func(ctx context.Context, c *wanCondition) error {
				if err := b.peers.unmount(dir); err != nil {
					return err
				}
				addr := b.alphaAddr
				if c.Proxied {
					addr = c.peerfsProxy.addr()
				}
				rtt, err := b.restartBetaVia(ctx, addr)
				if err != nil {
					return err
				}
				c.PeerfsRTTms = append(c.PeerfsRTTms, rtt)
				return b.peers.mount(dir, flags...)
			},
			teardown: func() error { return b.peers.unmount(dir) },
		}
	}
	var targets []*wanTarget
	if o.NoSync {
		b.rep.note("peerfs with --writes sync skipped (--no-sync)")
	} else {
		targets = append(targets, peerfsTarget(tPeerfs, peerfsMnt))
	}
	if o.NoJournal {
		b.rep.note("the journaling mount skipped (--no-journal)")
	} else {
		targets = append(targets, peerfsTarget(tPeerfsJournal, journalMnt, "--writes", "journal"))
	}
	if o.NoSSHFS {
		b.rep.note("sshfs skipped (--no-sshfs)")
	} else if _, _, _, missing := sshfsTools(); missing != nil {
		fmt.Fprintf(os.Stderr, "sshfs skipped: %v\n", missing)
		b.rep.note("sshfs skipped: %v", missing)
	} else {
		if b.ssh, err = startSSHD(ctx, filepath.Join(o.Dir, "ssh")); err != nil {
			return nil, fmt.Errorf("starting sshd for sshfs: %w (--no-sshfs skips it)", err)
		}
		undo = append(undo, b.ssh.stop)
		for _, n := range b.ssh.notes {
			b.rep.note("%s", n)
		}
		b.rep.SSHFS = "sshfs defaults; -o " + sshfsOptions
		var m *sshfsMount
		undo = append(undo, func() {
			if err := m.unmount(); err != nil {
				fmt.Fprintln(os.Stderr, "peerfs-bench:", err)
			}
		})
		targets = append(targets, &wanTarget{
			name: tSSHFS, dir: sshfsMnt,
			setup: func(ctx context.Context, c *wanCondition) error {
				m.unmount()
				port := b.ssh.port
				if c.Proxied {
					port = c.sshfsProxy.port()
				}
				var err error
				m, err = b.ssh.mountPort(ctx, port, b.owner, sshfsMnt)
				return err
			},
			teardown: func() error { return m.unmount() },
		})
	}

	if len(targets) == 0 {
		return nil, fmt.Errorf("nothing to measure: --no-sync, --no-journal and no sshfs")
	}
	b.rep.Conditions = []*wanCondition{{Name: wanLoopback}}
	for _, ms := range o.RTTs {
		c := &wanCondition{Name: fmt.Sprintf("%d ms", ms), Proxied: true, RTTms: ms, RateMbit: o.RateMbit}
		if c.EchoRTTms, err = proxies.echoRTT(ms, o.RateMbit); err != nil {
			return nil, fmt.Errorf("checking the proxy's round trip: %w", err)
		}
		if c.peerfsProxy, err = proxies.start(b.alphaAddr, ms, o.RateMbit); err != nil {
			return nil, err
		}
		if b.ssh != nil {
			if c.sshfsProxy, err = proxies.start(b.ssh.addr(), ms, o.RateMbit); err != nil {
				return nil, err
			}
		}
		fmt.Fprintf(os.Stderr, "condition %s: round trip through the proxy %.1f ms\n", c.Name, c.EchoRTTms)
		b.rep.Conditions = append(b.rep.Conditions, c)
	}

	for i := 0; i < o.Runs; i++ {
		for _, c := range b.rep.Conditions {
			for j := range targets {
				t := targets[(i+j)%len(targets)]
				if err := b.runTarget(ctx, t, c, i); err != nil {
					return nil, fmt.Errorf("%s, %s, run %d: %w", t.name, c.Name, i+1, err)
				}
			}
		}
	}
	printWANReport(os.Stdout, b.rep)
	return wanSection(b.rep), nil
}

// restartBetaVia stops beta, points its peer entry for alpha at addr, starts it with an
// empty chunk cache and waits for the link; it returns the link's first keepalive round trip
// in ms. The entry is replaced with "peer rm" and "peer add", as a user would do it.
func (b *wanBench) restartBetaVia(ctx context.Context, addr string) (float64, error) {
	p := b.peers
	if c := p.procs[1]; c != nil {
		c.Process.Signal(unix.SIGTERM)
		c.Wait()
		p.procs[1] = nil
	}
	if _, err := p.cli(p.homeB, "peer", "rm", "alpha"); err != nil {
		return 0, err
	}
	if _, err := p.cli(p.homeB, "peer", "add", b.alphaID, "--name", "alpha", "--addr", addr); err != nil {
		return 0, err
	}
	if err := p.restartBeta(ctx, true); err != nil {
		return 0, err
	}
	return p.waitLinked(ctx, "alpha")
}

// waitLinked waits until beta is connected to peer name and has measured a round trip to
// it, and returns that round trip in ms.
func (p *peers) waitLinked(ctx context.Context, name string) (float64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := p.cli(p.homeB, "status", "--json")
		if err == nil {
			var st struct {
				Peers []struct {
					Name      string
					Connected bool
					RTTMicros int64  `json:"rtt_us"`
					LastError string `json:"last_error"`
				}
			}
			if err = json.Unmarshal(out, &st); err == nil {
				for _, pe := range st.Peers {
					if pe.Name == name && pe.Connected && pe.RTTMicros > 0 {
						return float64(pe.RTTMicros) / 1000, nil
					}
					if pe.Name == name && pe.LastError != "" {
						err = fmt.Errorf("%s", pe.LastError)
					}
				}
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("beta did not connect to %s: %v (log in %s.log)", name, err, p.homeB)
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reportLog prints the daemons' warnings and errors: a benchmark that passes is no proof
// that nothing went wrong underneath.
func (p *peers) reportLog() {
	(&mountBench{peers: p}).reportDaemonLog()
}

// runTarget runs the four workloads on one target under one condition, from a cold start.
func (b *wanBench) runTarget(ctx context.Context, t *wanTarget, c *wanCondition, run int) (err error) {
	if err := t.setup(ctx, c); err != nil {
		return fmt.Errorf("setting up: %w", err)
	}
	clone := filepath.Join(b.owner, "clone-"+t.name)
	create := filepath.Join(b.owner, "create-"+t.name)
	defer func() {
		if terr := t.teardown(); err == nil && terr != nil {
			err = fmt.Errorf("tearing down: %w", terr)
		}
		// The outputs go on the owner's side, after the unmount: through the mount, at 50 ms, the
		// removal alone would take longer than the workloads.
		for _, d := range []string{clone, create} {
			if rerr := os.RemoveAll(d); err == nil && rerr != nil {
				err = rerr
			}
		}
		unix.Sync() // the next target starts without this one's dirty pages to write back
	}()
	workloads := []struct {
		key string
		run func(context.Context) (wanSample, error)
	}{
		{wColdRead, func(ctx context.Context) (wanSample, error) { return b.coldRead(ctx, t) }},
		{wFindGrep, func(ctx context.Context) (wanSample, error) { return b.findGrep(ctx, t) }},
		{wClone, func(ctx context.Context) (wanSample, error) { return b.clone(ctx, t, clone, run == 0) }},
		{wCreate, func(ctx context.Context) (wanSample, error) { return b.create(ctx, t, create) }},
	}
	for _, w := range workloads {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		before := b.counters(t)
		s, err := w.run(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", w.key, err)
		}
		if after := b.counters(t); before != nil && after != nil {
			s.RoundTrips = after.Counters["round_trips"] - before.Counters["round_trips"]
			s.OwnerReads = op(*after, "owner_read").Calls - op(*before, "owner_read").Calls
		}
		res := b.rep.result(w.key, t.name, c.Name)
		res.Samples = append(res.Samples, s)
		fmt.Fprintf(os.Stderr, "run %d %-8s %-6s %-9s %8.2f s\n", run+1, c.Name, t.name, w.key, s.Seconds)
	}
	return nil
}

// counters returns the peerfs mount's counters, or nil for sshfs and on error (which becomes
// a note: the counters are a diagnostic, not the measurement).
func (b *wanBench) counters(t *wanTarget) *api.StatsResult {
	if t.name != tPeerfs && t.name != tPeerfsJournal {
		return nil
	}
	st, err := b.peers.stats(t.dir)
	if err != nil {
		b.rep.note("peerfs stats failed: %v", err)
		return nil
	}
	return &st
}

// coldRead reads big.bin through the target with dd after dropping the owner's page cache
// for it; the target's own cache is empty since its setup.
func (b *wanBench) coldRead(ctx context.Context, t *wanTarget) (wanSample, error) {
	note, err := dropFileCache(b.bigOwner)
	if err != nil {
		return wanSample{}, err
	}
	if note != "" {
		b.rep.note("%s", note)
	}
	r, err := ddRead(ctx, filepath.Join(t.dir, "big.bin"))
	if err != nil {
		return wanSample{}, err
	}
	if r.bytes != b.o.FileSize {
		return wanSample{}, fmt.Errorf("read %d bytes through %s, want %d", r.bytes, t.name, b.o.FileSize)
	}
	return wanSample{Seconds: r.seconds}, nil
}

// findGrep lists the tree with find and searches every file of it with grep -r, each in a
// process of its own, after dropping the owner's page cache for the tree. Both outputs are
// checked: every file found, every needle found.
func (b *wanBench) findGrep(ctx context.Context, t *wanTarget) (wanSample, error) {
	if err := dropTreeCache(b.tree); err != nil {
		return wanSample{}, err
	}
	dir := filepath.Join(t.dir, filepath.Base(b.tree))
	var s wanSample
	lines := func(secs *float64, want int, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		t0 := time.Now()
		out, err := cmd.Output()
		*secs = time.Since(t0).Seconds()
		if err != nil {
			return fmt.Errorf("%s: %v %s", name, err, strings.TrimSpace(stderr.String()))
		}
		if n := strings.Count(string(out), "\n"); n != want {
			return fmt.Errorf("%s %s: %d lines, want %d", name, strings.Join(args, " "), n, want)
		}
		return nil
	}
	if err := lines(&s.FindSeconds, b.o.TreeFiles, "find", dir, "-type", "f"); err != nil {
		return s, err
	}
	if err := lines(&s.GrepSeconds, b.greps, "grep", "-r", "-l", wanTreeNeedle, dir); err != nil {
		return s, err
	}
	s.Seconds = s.FindSeconds + s.GrepSeconds
	return s, nil
}

// clone runs git clone of local/repo into the target; check verifies the owner's copy.
func (b *wanBench) clone(ctx context.Context, t *wanTarget, onOwner string, check bool) (wanSample, error) {
	cmd := exec.CommandContext(ctx, "git", cloneArgs(b.repo, filepath.Join(t.dir, filepath.Base(onOwner)))...)
	cmd.Env = gitEnv()
	t0 := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return wanSample{}, fmt.Errorf("git clone: %v %s", err, strings.TrimSpace(string(out)))
	}
	s := wanSample{Seconds: time.Since(t0).Seconds()}
	if err := drain(t, &s); err != nil {
		return s, err
	}
	if check { // the owner's copy is a clean checkout once clone has returned (and, journaling, drained)
		st := exec.CommandContext(ctx, "git", "-C", onOwner, "status", "--porcelain")
		st.Env = gitEnv()
		if out, err := st.CombinedOutput(); err != nil || len(out) > 0 {
			return s, fmt.Errorf("git status in the owner's copy of the %s clone: %v %s", t.name, err, firstLines(string(out), 5))
		}
	}
	return s, nil
}

// drain waits, for the journaling mount, until everything written is durable on the owner
// (an fsync of the mount's top folder), and records how long that took.
func drain(t *wanTarget, s *wanSample) error {
	if t.name != tPeerfsJournal {
		return nil
	}
	t0 := time.Now()
	f, err := os.Open(t.dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync of the journaling mount: %w", err)
	}
	s.DrainSeconds = time.Since(t0).Seconds()
	return nil
}

// create makes --creates files of 4 KiB in the target through the create-files child (see
// mountBench.create for why a child) and checks that the owner has them all.
func (b *wanBench) create(ctx context.Context, t *wanTarget, onOwner string) (wanSample, error) {
	self, err := os.Executable()
	if err != nil {
		return wanSample{}, err
	}
	cmd := exec.CommandContext(ctx, self, "create-files", filepath.Join(t.dir, filepath.Base(onOwner)), fmt.Sprint(b.o.Creates))
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wanSample{}, fmt.Errorf("creating files: %v %s", err, strings.TrimSpace(string(out)))
	}
	var s wanSample
	if _, err := fmt.Sscan(string(out), &s.Seconds); err != nil {
		return s, fmt.Errorf("create-files printed %q", out)
	}
	if err := drain(t, &s); err != nil {
		return s, err
	}
	ents, err := os.ReadDir(onOwner)
	if err != nil {
		return s, err
	}
	if len(ents) != b.o.Creates {
		return s, fmt.Errorf("the owner has %d of the %d files created through %s", len(ents), b.o.Creates, t.name)
	}
	return s, nil
}

// makeWANTree writes n small files under dir, in leaf directories of about 100 files, ten
// leaves to a parent: the shape of a source tree's packages, whose listings each take one
// request. Sizes are log-uniform from 200 B to 16 KiB (median about 1.8 KiB), text from the
// repository generator's words; one file in wanNeedleEveryN holds the needle grep searches
// for. It returns the number of directories, of files within peerfs's default inline
// threshold, and of needles.
func makeWANTree(dir string, n int) (dirs, inline, needles int, err error) {
	os.RemoveAll(dir)
	r := rand.New(rand.NewChaCha8([32]byte{9}))
	leaves := max(1, (n+99)/100)
	var line strings.Builder
	for i := range n {
		leaf := i % leaves
		d := filepath.Join(dir, fmt.Sprintf("p%02d", leaf/10), fmt.Sprintf("pkg%03d", leaf))
		if i < leaves {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return 0, 0, 0, err
			}
		}
		size := int(200 * math.Pow(80, r.Float64())) // 200 B .. 16 KiB
		buf := make([]byte, 0, size+100)
		if i%wanNeedleEveryN == 0 {
			buf = append(buf, "// "+wanTreeNeedle+"\n"...)
			needles++
		}
		for len(buf) < size {
			line.Reset()
			for w := 3 + r.IntN(8); w > 0; w-- {
				line.WriteString(repoWords[r.IntN(len(repoWords))])
				line.WriteByte(' ')
			}
			line.WriteByte('\n')
			buf = append(buf, line.String()...)
		}
		name := fmt.Sprintf("%s_%05d%s", repoWords[r.IntN(len(repoWords))], i, repoExts[r.IntN(len(repoExts))])
		if err := os.WriteFile(filepath.Join(d, name), buf, 0o644); err != nil {
			return 0, 0, 0, err
		}
		if len(buf) <= fusefs.DefaultInline {
			inline++
		}
	}
	return leaves + (leaves+9)/10, inline, needles, nil
}

// dropTreeCache evicts the page cache of every file under dir: one sync (fadvise does not
// evict dirty pages), then posix_fadvise(POSIX_FADV_DONTNEED) on each file. Unlike
// dropFileCache it never falls back to drop_caches, which would cost a sync per file.
func dropTreeCache(dir string) error {
	unix.Sync()
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
}
