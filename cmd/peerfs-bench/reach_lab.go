package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/netlab"
)

// The reach suite's lab part: the built peerfs binary, daemons and "peerfs relay serve", in
// network namespaces behind NAT routers built with internal/netlab (one lab for the whole
// run). Three measurements:
//
//   - link-up: from starting two daemons with fresh homes to the first "peerfs ls PEER:"
//     that succeeds, for a peer with a public address (direct), two hosts behind home NATs
//     that meet at the relay and punch (punched; also the time until status says so) and a
//     host behind a symmetric NAT (relayed);
//   - pull: one --lab-size file pulled over each of the three paths, interleaved rounds, with
//     the CPU time of the puller, the owner and the relay process from /proc/PID/stat;
//   - cut: a mount on a punched link, the direct path dropped between the two routers
//     (Lab.Cut): the time until a read of a file the mount never read succeeds again.

const (
	labDirect  = api.PathDirect
	labPunched = api.PathPunched
	labRelayed = api.PathRelayed
)

var labPaths = []string{labDirect, labPunched, labRelayed}

type labLinkSample struct {
	UsableMs float64 `json:"usable_ms"` // start of the daemons → "peerfs ls PEER:" succeeds
	PathMs   float64 `json:"path_ms"`   // start → status shows the link on its expected path
	FirstOn  string  `json:"first_on"`  // the link's path in the status read just after that ls
}

type labPullSample struct {
	MiBs            float64 `json:"mib_s"`
	PullerCPUPerGiB float64 `json:"puller_cpu_s_per_gib"`
	OwnerCPUPerGiB  float64 `json:"owner_cpu_s_per_gib"`
	RelayCPUPerGiB  float64 `json:"relay_cpu_s_per_gib"`
}

type labCutSample struct {
	ServingMs float64 `json:"serving_ms"` // cut → a read of an uncached file succeeds
	PathAfter string  `json:"path_after"`
}

type labReport struct {
	Skipped string                     `json:"skipped,omitempty"`
	Runs    int                        `json:"runs"`
	CutRuns int                        `json:"cut_runs"`
	Size    int64                      `json:"size"`
	Link    map[string][]labLinkSample `json:"link"`
	Pull    map[string][]labPullSample `json:"pull"`
	Broken  map[string]int             `json:"pulls_broken,omitempty"` // by a link replaced under them, done again
	Cut     []labCutSample             `json:"cut"`
	CutNote string                     `json:"cut_note,omitempty"`
	Seconds float64                    `json:"seconds"`
}

// labTB is what netlab needs of its owner (netlab.TB), for a program that is not a test:
// Fatal and Skip end the goroutine that runs the lab (runtime.Goexit, as package testing
// does), and the cleanups run when runLab returns.
type labTB struct {
	mu       sync.Mutex
	cleanups []func()
	err      error
	skip     string
}

func (t *labTB) Helper()          {}
func (t *labTB) Cleanup(f func()) { t.mu.Lock(); t.cleanups = append(t.cleanups, f); t.mu.Unlock() }

func (t *labTB) Errorf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = fmt.Errorf(format, args...)
	}
}

func (t *labTB) Fatal(args ...any) { t.Errorf("%s", fmt.Sprint(args...)); runtime.Goexit() }
func (t *labTB) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	runtime.Goexit()
}
func (t *labTB) Skip(args ...any) { t.skip = fmt.Sprint(args...); runtime.Goexit() }
func (t *labTB) Skipf(format string, args ...any) {
	t.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// runLab runs fn as a test would run: on a goroutine of its own, then its cleanups, last
// first, each on its own goroutine too (a cleanup may call Fatal).
func runLab(fn func(t *labTB)) (skip string, err error) {
	t := &labTB{}
	onGoroutine := func(f func()) {
		done := make(chan struct{})
		go func() { defer close(done); f() }()
		<-done
	}
	onGoroutine(func() { fn(t) })
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		onGoroutine(t.cleanups[i])
	}
	return t.skip, t.err
}

// labDevice is one device of the lab: a home of its own and, while started, a daemon in its
// host's namespace. The CLI runs outside the namespaces: it reaches the daemon by the
// control socket, a file.
type labDevice struct {
	t      *labTB
	bin    string
	name   string
	home   string
	host   *netlab.Host
	id     string
	daemon *exec.Cmd
	log    netlab.Output
}

func (d *labDevice) tryCLI(args ...string) (string, error) {
	return peerfsOut(d.bin, d.home, args...)
}

func (d *labDevice) cli(args ...string) string {
	out, err := d.tryCLI(args...)
	if err != nil {
		d.t.Fatalf("%s: %v", d.name, err)
	}
	return out
}

func (d *labDevice) start() {
	d.log.Reset()
	d.daemon = d.host.Command(d.bin, "--home", d.home, "daemon")
	d.daemon.Stderr = &d.log
	if err := d.daemon.Start(); err != nil {
		d.t.Fatalf("%s: starting the daemon: %v", d.name, err)
	}
}

func (d *labDevice) stop() {
	if d.daemon == nil {
		return
	}
	netlab.Interrupt(d.daemon, 15*time.Second)
	d.daemon = nil
}

// pid is the daemon's process: "ip netns exec" execs the program, it does not fork.
func (d *labDevice) pid() int { return d.daemon.Process.Pid }

// peer returns d's status of the peer named name.
func (d *labDevice) peer(name string) (api.PeerStatus, error) {
	out, err := d.tryCLI("status", "--json")
	if err != nil {
		return api.PeerStatus{}, err
	}
	var st api.StatusResult
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return api.PeerStatus{}, err
	}
	for _, p := range st.Peers {
		if p.Name == name {
			return p, nil
		}
	}
	return api.PeerStatus{}, fmt.Errorf("%s has no peer %s", d.name, name)
}

// waitPath waits until d sees peer connected on path.
func (d *labDevice) waitPath(ctx context.Context, peer, path string, within time.Duration) {
	var last api.PeerStatus
	for deadline := time.Now().Add(within); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(20 * time.Millisecond) {
		if p, err := d.peer(peer); err == nil {
			last = p
			if p.Connected && p.Path == path {
				return
			}
		}
	}
	d.t.Fatalf("%s never saw %s on path %q within %v (last: connected %v, path %q, error %q); its log:\n%s",
		d.name, peer, path, within, last.Connected, last.Path, last.LastError, tail(d.log.String(), 2000))
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// labWorld is the lab's network and the devices and relay in it:
//
//	relay, server: public hosts; laptop behind home1 (home NAT), desktop behind home2 (home
//	NAT), phone behind cgnat (symmetric NAT).
type labWorld struct {
	t        *labTB
	ctx      context.Context
	lab      *netlab.Lab
	bin, dir string
	relay    *exec.Cmd
	relayURL string
	hosts    map[string]*netlab.Host
	routers  map[string]*netlab.Router
	behind   map[string]*netlab.Router // the router each device behind one hangs off
	homes    int
	broken   map[string]int // pulls ended by a link replaced under them, per path
}

// settle waits until the laptop's links to the owners have kept their paths and have not
// been replaced for a second: a link may still change after it first shows its path (the
// other side's dial through the relay arrives late).
func (w *labWorld) settle(laptop *labDevice, owners map[string]*labDevice) {
	since := map[string]time.Time{}
	for deadline, stableFrom := time.Now().Add(30*time.Second), time.Now(); ; time.Sleep(100 * time.Millisecond) {
		w.check()
		same := true
		for path, o := range owners {
			p, err := laptop.peer(o.name)
			if err != nil || !p.Connected || p.Path != path || !p.Since.Equal(since[path]) {
				same = false
				since[path] = p.Since
			}
		}
		if !same {
			stableFrom = time.Now()
		} else if time.Since(stableFrom) >= time.Second {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("the laptop's links did not settle on their paths within 30 s")
		}
	}
}

// pairs: the device that checks the link, the peer it checks, for each path.
var labPairs = map[string][2]string{
	labDirect:  {"laptop", "server"}, // the laptop has the server's public address
	labPunched: {"desktop", "laptop"},
	labRelayed: {"phone", "laptop"},
}

func newLabWorld(ctx context.Context, t *labTB, bin, dir string) *labWorld {
	w := &labWorld{t: t, ctx: ctx, bin: bin, dir: dir, hosts: map[string]*netlab.Host{}, routers: map[string]*netlab.Router{},
		behind: map[string]*netlab.Router{}}
	w.lab = netlab.New(t)
	w.hosts["relay"] = w.lab.Public("relay")
	w.hosts["server"] = w.lab.Public("server")
	for _, r := range []struct {
		router, host string
		nat          netlab.NAT
	}{{"home1", "laptop", netlab.HomeNAT}, {"home2", "desktop", netlab.HomeNAT}, {"cgnat", "phone", netlab.SymmetricNAT}} {
		w.routers[r.router] = w.lab.Router(r.router, netlab.RouterOptions{NAT: r.nat})
		w.behind[r.host] = w.routers[r.router]
	}
	w.startRelay()
	return w
}

func (w *labWorld) startRelay() {
	h := w.hosts["relay"]
	w.relay = h.Command(w.bin, "--home", filepath.Join(w.dir, "relay"), "relay", "serve", "--listen", ":443",
		"--advertise", h.Addr.String(), "--json", "-q")
	stdout, err := w.relay.StdoutPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	w.relay.Stderr = os.Stderr
	if err := w.relay.Start(); err != nil {
		w.t.Fatalf("starting the relay: %v", err)
	}
	w.t.Cleanup(func() { w.relay.Process.Signal(os.Interrupt); w.relay.Wait() })
	line := make([]byte, 0, 512)
	for b := make([]byte, 1); ; {
		if _, err := stdout.Read(b); err != nil {
			w.t.Fatalf("the relay printed no URL: %v", err)
		}
		if b[0] == '\n' {
			break
		}
		line = append(line, b[0])
	}
	go io.Copy(io.Discard, stdout)
	var first struct{ URL string }
	if err := json.Unmarshal(line, &first); err != nil || first.URL == "" {
		w.t.Fatalf("the relay's first line %q: %v", line, err)
	}
	w.relayURL = first.URL
}

// devices makes fresh homes for the named devices (so no run starts from what an earlier
// one learnt), each trusting the others by device ID and using the relay; the server's
// address is known to all. Each exports share to every other device.
func (w *labWorld) devices(share string, names ...string) map[string]*labDevice {
	w.homes++
	// A device behind a router gets a new host namespace each run. From the namespace of a
	// run that ended with the direct path cut, the next punch failed for a minute: every
	// run punches from port 7462 between the same two router addresses, so a socket the
	// earlier run left behind (a FIN still retransmitted, TIME_WAIT) can hold the pair.
	for _, n := range names {
		if r := w.behind[n]; r != nil {
			w.hosts[n] = r.AddHost(fmt.Sprintf("%s%d", n, w.homes))
		}
	}
	ds := map[string]*labDevice{}
	for _, n := range names {
		d := &labDevice{t: w.t, bin: w.bin, name: n, host: w.hosts[n], home: filepath.Join(w.dir, fmt.Sprintf("home-%d", w.homes), n)}
		d.cli("init", "--name", n)
		d.id = strings.TrimSpace(d.cli("id"))
		w.t.Cleanup(d.stop)
		ds[n] = d
	}
	for _, a := range names {
		d := ds[a]
		d.cli("relay", "add", w.relayURL)
		for _, b := range names {
			if a == b {
				continue
			}
			args := []string{"peer", "add", ds[b].id, "--name", b}
			if b == "server" {
				args = append(args, "--addr", w.hosts["server"].Addr.String()+":7462")
			}
			d.cli(args...)
		}
		if share != "" {
			peers := []string{}
			for _, b := range names {
				if b != a {
					peers = append(peers, "--peer", b)
				}
			}
			d.cli(append([]string{"share", "add", "docs", share}, peers...)...)
		}
	}
	return ds
}

// freshNAT empties the routers' connection tracking, so a run's NAT mappings and filter
// states are not an earlier run's.
func (w *labWorld) freshNAT() {
	for _, r := range w.routers {
		r.Command("conntrack", "-F").Run()
	}
}

func (w *labWorld) check() {
	if w.ctx.Err() != nil {
		w.t.Fatal(w.ctx.Err())
	}
}

// linkOnce starts the two devices of path and times the first successful "peerfs ls PEER:"
// and the link on path.
func (w *labWorld) linkOnce(path, share string) labLinkSample {
	who, peer := labPairs[path][0], labPairs[path][1]
	w.freshNAT()
	ds := w.devices(share, who, peer)
	d := ds[who]
	start := time.Now()
	ds[peer].start()
	d.start()
	defer d.stop()
	defer ds[peer].stop()
	var s labLinkSample
	for deadline := start.Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		w.check()
		if time.Now().After(deadline) {
			w.t.Fatalf("%s: no usable link from %s to %s within 60 s; its log:\n%s", path, who, peer, tail(d.log.String(), 2000))
		}
		if s.UsableMs == 0 {
			if _, err := d.tryCLI("ls", peer+":"); err != nil {
				continue
			}
			s.UsableMs = ms(time.Since(start))
			p, err := d.peer(peer)
			if err == nil {
				s.FirstOn = p.Path
			}
			if s.FirstOn == path {
				s.PathMs = s.UsableMs
				return s
			}
		}
		if p, err := d.peer(peer); err == nil && p.Connected && p.Path == path {
			s.PathMs = ms(time.Since(start))
			return s
		}
	}
}

// pulls starts the laptop and the three devices it pulls from, one per path, and pulls the
// shared file over each path in turn, runs times.
func (w *labWorld) pulls(share string, size int64, runs int) map[string][]labPullSample {
	ds := w.devices(share, "laptop", "server", "desktop", "phone")
	w.freshNAT()
	for _, d := range ds {
		d.start()
		defer d.stop()
	}
	laptop := ds["laptop"]
	owners := map[string]*labDevice{labDirect: ds["server"], labPunched: ds["desktop"], labRelayed: ds["phone"]}
	for _, path := range labPaths {
		laptop.waitPath(w.ctx, owners[path].name, path, 60*time.Second)
	}
	w.settle(laptop, owners)
	dest := filepath.Join(w.dir, "pulled.bin")
	out := map[string][]labPullSample{}
	broken := map[string]int{}
	defer func() { w.broken = broken }()
	for run := 0; run <= runs; run++ { // run 0 warms the owners' page cache and the paths
		for i := 0; i < len(labPaths); i++ {
			path := labPaths[i]
			w.check()
			os.Remove(dest)
			owner := owners[path]
			p0, o0, r0 := procCPUOrFatal(w.t, laptop.pid()), procCPUOrFatal(w.t, owner.pid()), procCPUOrFatal(w.t, w.relay.Process.Pid)
			t0 := time.Now()
			if _, err := laptop.tryCLI("pull", owner.name+":docs/data.bin", dest); err != nil {
				// A link replaced under the pull ends it (the CLI says to run it again to
				// resume): counted, and the round's pull done again from the start.
				if !strings.Contains(err.Error(), "replaced by") || broken[path] >= 10 {
					w.t.Fatalf("%s: %v", path, err)
				}
				broken[path]++
				fmt.Printf("lab pull %d  %-8s broken by a link replacement (%v); again\n", run, path, err)
				w.settle(laptop, owners)
				i--
				continue
			}
			el := time.Since(t0)
			p1, o1, r1 := procCPUOrFatal(w.t, laptop.pid()), procCPUOrFatal(w.t, owner.pid()), procCPUOrFatal(w.t, w.relay.Process.Pid)
			if fi, err := os.Stat(dest); err != nil || fi.Size() != size {
				w.t.Fatalf("%s: the pulled file: %v", path, err)
			}
			if q, err := laptop.peer(owner.name); err != nil || q.Path != path {
				w.t.Fatalf("%s: the link moved to path %q during the pull (%v)", path, q.Path, err)
			}
			if run == 0 {
				continue
			}
			gib := float64(size) / (1 << 30)
			s := labPullSample{MiBs: mibs(size, el.Seconds()), PullerCPUPerGiB: (p1 - p0).Seconds() / gib,
				OwnerCPUPerGiB: (o1 - o0).Seconds() / gib, RelayCPUPerGiB: (r1 - r0).Seconds() / gib}
			fmt.Printf("lab pull %d  %-8s %7.0f MiB/s  puller %.2f  owner %.2f  relay %.3f core-s/GiB\n",
				run, path, s.MiBs, s.PullerCPUPerGiB, s.OwnerCPUPerGiB, s.RelayCPUPerGiB)
			out[path] = append(out[path], s)
		}
	}
	os.Remove(dest)
	return out
}

func procCPUOrFatal(t *labTB, pid int) time.Duration {
	c, err := procCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// cutOnce links the desktop to the laptop on a punched path, mounts the laptop's share and
// reads one file, then drops the direct path between the two routers and times until a
// file the mount never read is read whole.
func (w *labWorld) cutOnce(share string, want []byte) labCutSample {
	w.freshNAT()
	ds := w.devices(share, "laptop", "desktop")
	laptop, desktop := ds["laptop"], ds["desktop"]
	laptop.start()
	desktop.start()
	defer laptop.stop()
	defer desktop.stop()
	desktop.waitPath(w.ctx, "laptop", labPunched, 60*time.Second)
	mnt := filepath.Join(w.dir, fmt.Sprintf("mnt-%d", w.homes))
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		w.t.Fatal(err)
	}
	desktop.cli("mount", "laptop:docs", mnt)
	defer desktop.tryCLI("unmount", mnt)
	// "ip netns exec" gives the daemon a mount namespace of its own: its mount is reached
	// through /proc/PID/root.
	inMount := func(name string) string {
		return filepath.Join("/proc", strconv.Itoa(desktop.pid()), "root", mnt, name)
	}
	if _, err := os.ReadFile(inMount("first.bin")); err != nil {
		w.t.Fatalf("reading through the mount before the cut: %v", err)
	}
	restore := w.lab.Cut(w.routers["home1"].Addr, w.routers["home2"].Addr)
	defer restore()
	cut := time.Now()
	for deadline := cut.Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		w.check()
		if time.Now().After(deadline) {
			w.t.Fatalf("the mount did not serve within 90 s of the cut; the desktop's log:\n%s", tail(desktop.log.String(), 2000))
		}
		ctx, cancel := context.WithTimeout(w.ctx, 60*time.Second)
		got, err := exec.CommandContext(ctx, "cat", inMount("second.bin")).Output()
		cancel()
		if err == nil && bytes.Equal(got, want) {
			break
		}
	}
	s := labCutSample{ServingMs: ms(time.Since(cut))}
	if p, err := desktop.peer("laptop"); err == nil {
		s.PathAfter = p.Path
	}
	return s
}

// runReachLab measures everything in one lab; a report with Skipped set when the lab
// cannot run here.
func runReachLab(ctx context.Context, bin string, size int64, runs, cutRuns int) (labReport, error) {
	r := labReport{Runs: runs, CutRuns: cutRuns, Size: size, Link: map[string][]labLinkSample{}}
	dir, err := os.MkdirTemp("", "peerfs-bench-reach-lab-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	share := filepath.Join(dir, "share")
	if err := os.MkdirAll(share, 0o755); err != nil {
		return r, err
	}
	if err := writeRandom(filepath.Join(share, "data.bin"), size); err != nil {
		return r, err
	}
	if err := writeRandom(filepath.Join(share, "first.bin"), 4<<20); err != nil {
		return r, err
	}
	// Bytes of their own: no chunk of this file is in a cache because of another.
	want := make([]byte, 1<<20)
	rand.Read(want)
	if err := os.WriteFile(filepath.Join(share, "second.bin"), want, 0o644); err != nil {
		return r, err
	}
	start := time.Now()
	skip, err := runLab(func(t *labTB) {
		phase := time.Now()
		took := func(what string) {
			fmt.Printf("lab: %s took %.1f s\n", what, time.Since(phase).Seconds())
			phase = time.Now()
		}
		w := newLabWorld(ctx, t, bin, dir)
		took("building the lab")
		for run := 1; run <= runs; run++ {
			for _, path := range labPaths {
				s := w.linkOnce(path, share)
				fmt.Printf("lab link %d  %-8s usable %7.0f ms (first on %s)  on its path %7.0f ms\n", run, path, s.UsableMs, s.FirstOn, s.PathMs)
				r.Link[path] = append(r.Link[path], s)
			}
		}
		took("link-up")
		r.Pull = w.pulls(share, size, runs)
		r.Broken = w.broken
		took("pull")
		if err := fuseMissing(); err != nil {
			r.CutNote = "not measured: " + err.Error()
			fmt.Println("lab cut: skipped:", err)
			return
		}
		for run := 1; run <= cutRuns; run++ {
			s := w.cutOnce(share, want)
			fmt.Printf("lab cut %d  the mount served again %7.0f ms after the cut (path %s)\n", run, s.ServingMs, s.PathAfter)
			r.Cut = append(r.Cut, s)
		}
		took("the cuts")
	})
	r.Seconds = time.Since(start).Seconds()
	if skip != "" {
		r.Skipped = skip
		return r, nil
	}
	if err != nil && ctx.Err() != nil {
		return r, ctx.Err()
	}
	if err != nil {
		return r, fmt.Errorf("the reach lab: %w", err)
	}
	return r, nil
}

var labPathDevices = map[string]string{
	labDirect:  "laptop (home NAT) dials the server's public address",
	labPunched: "desktop and laptop, two home NATs, meet at the relay",
	labRelayed: "phone (symmetric NAT) and laptop (home NAT)",
}

// labMarkdown is the lab part of the reach section: what was measured, the three tables and
// how to read them.
func labMarkdown(b *strings.Builder, r labReport) {
	fmt.Fprintf(b, "The built `peerfs` binary in network namespaces made by internal/netlab (docs/ARCHITECTURE.md, "+
		"\"The network lab\"): a relay (`peerfs relay serve`, port 443) and a server with public addresses on the "+
		"lab's internet; a laptop and a desktop each behind a home router (masquerade, WAN-side `ct state new drop`); "+
		"a phone behind a symmetric NAT (`masquerade random,fully-random`). Every hop is a veth pair, with no delay or "+
		"rate limit added, so the figures measure peerfs and this machine's cores, not a network. Each run starts from "+
		"fresh homes, a new host namespace behind each router and empty connection tracking in the routers. The lab "+
		"part took %.0f s.\n\n", r.Seconds)

	fmt.Fprintf(b, "**Link-up.** From starting both daemons to the first `peerfs ls PEER:` that succeeds (polled every "+
		"10 ms, each poll a `peerfs` process), and to `peerfs status` showing the link on its path. %d rounds, each "+
		"path once per round; ms, median (min-max).\n\n", r.Runs)
	b.WriteString("| path | devices | usable, ms | on its path, ms | path at the first usable ls |\n|---|---|---|---|---|\n")
	for _, path := range labPaths {
		var usable, on []float64
		first := map[string]int{}
		for _, s := range r.Link[path] {
			usable = append(usable, s.UsableMs)
			on = append(on, s.PathMs)
			first[s.FirstOn]++
		}
		if len(usable) == 0 {
			continue
		}
		var firsts []string
		for _, p := range labPaths {
			if first[p] > 0 {
				firsts = append(firsts, fmt.Sprintf("%s %d of %d", p, first[p], len(usable)))
			}
		}
		um, ulo, uhi := median(usable)
		om, olo, ohi := median(on)
		fmt.Fprintf(b, "| %s | %s | %.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) | %s |\n", path, labPathDevices[path],
			um, ulo, uhi, om, olo, ohi, strings.Join(firsts, ", "))
	}

	fmt.Fprintf(b, "\n**Pull.** `peerfs pull` of one %s file by the laptop from the server (direct), the desktop "+
		"(punched) and the phone (relayed), all linked at once; %d rounds, each pulling over every path once, after "+
		"one unmeasured round that warms the page caches. \"of direct\" is each round's figure over the same round's "+
		"direct one. CPU is each process's user + system time over the pull, from /proc/PID/stat (10 ms ticks), per "+
		"GiB pulled: the laptop's daemon (puller), the owner's daemon and the relay process.\n\n", spelledSize(r.Size), r.Runs)
	b.WriteString("| path | MiB/s | of direct | puller core-s/GiB | owner core-s/GiB | relay core-s/GiB |\n|---|---|---|---|---|---|\n")
	direct := r.Pull[labDirect]
	for _, path := range labPaths {
		var mb, ratio, pc, oc, rc []float64
		for i, s := range r.Pull[path] {
			mb = append(mb, s.MiBs)
			pc = append(pc, s.PullerCPUPerGiB)
			oc = append(oc, s.OwnerCPUPerGiB)
			rc = append(rc, s.RelayCPUPerGiB)
			if i < len(direct) {
				ratio = append(ratio, 100*s.MiBs/direct[i].MiBs)
			}
		}
		if len(mb) == 0 {
			continue
		}
		m, lo, hi := median(mb)
		fmt.Fprintf(b, "| %s | %.0f (%.0f-%.0f) | ", path, m, lo, hi)
		if path == labDirect {
			b.WriteString("— |")
		} else {
			rm, rlo, rhi := median(ratio)
			fmt.Fprintf(b, "%.0f%% (%.0f-%.0f) |", rm, rlo, rhi)
		}
		for _, xs := range [][]float64{pc, oc, rc} {
			cm, clo, chi := median(xs)
			fmt.Fprintf(b, " %.2f (%.2f-%.2f) |", cm, clo, chi)
		}
		b.WriteString("\n")
	}

	var brokenNotes []string
	for _, path := range labPaths {
		if n := r.Broken[path]; n > 0 {
			brokenNotes = append(brokenNotes, fmt.Sprintf("%d %s", n, path))
		}
	}
	if len(brokenNotes) > 0 {
		fmt.Fprintf(b, "\nPulls ended by a link replaced under them (\"replaced by a newer link\"), and done again from "+
			"the start before the round went on: %s. Before the pulls the laptop waits until its three links have kept "+
			"their paths for a second.\n", strings.Join(brokenNotes, ", "))
	}
	b.WriteString("\n**The direct path dies under a mount.** The desktop mounts the laptop's share over a punched link " +
		"and reads a file through it; then the lab drops everything between the two routers (`Lab.Cut`: packets " +
		"vanish, nothing is reset) and `cat` of a file the mount has not read is retried until it succeeds. ")
	if r.CutNote != "" {
		fmt.Fprintf(b, "%s.\n", strings.ToUpper(r.CutNote[:1])+r.CutNote[1:])
	} else {
		var serve []float64
		paths := map[string]int{}
		for _, s := range r.Cut {
			serve = append(serve, s.ServingMs/1000)
			paths[s.PathAfter]++
		}
		m, lo, hi := median(serve)
		fmt.Fprintf(b, "%d runs: the mount served again %.1f s (%.1f-%.1f) after the cut, the link then on path %s in %d of %d.\n",
			len(serve), m, lo, hi, labRelayed, paths[labRelayed], len(serve))
	}
	reading := labReading(r)
	if len(reading) > 0 {
		b.WriteString("\n")
		for _, l := range reading {
			fmt.Fprintf(b, "- %s\n", l)
		}
	}
}

func first(m, _, _ float64) float64 { return m }

// deadPathTimeout mirrors internal/node's TCP_USER_TIMEOUT on a link's connection
// (deadpath.go), which bounds how long a dead direct path holds a request.
const deadPathTimeout = 10 * time.Second

// labReading says what the lab's figures show and why, from the figures.
func labReading(r labReport) []string {
	var out []string
	if u := r.Link[labDirect]; len(u) > 0 {
		med := func(path string, f func(labLinkSample) float64) float64 {
			var xs []float64
			for _, s := range r.Link[path] {
				xs = append(xs, f(s))
			}
			m, _, _ := median(xs)
			return m
		}
		usable := func(s labLinkSample) float64 { return s.UsableMs }
		onPath := func(s labLinkSample) float64 { return s.PathMs }
		l := fmt.Sprintf("**Link-up is process time, not network time.** A veth hop costs microseconds, so the %.0f ms "+
			"(direct), %.0f ms (relayed) and %.0f ms (punched) to a usable link are the daemons' own start, a relay join "+
			"and a TLS 1.3 handshake (X25519MLKEM768, verified both ways; a second one on the punched path), and the "+
			"polling `peerfs` processes, all on two loaded cores.", med(labDirect, usable), med(labRelayed, usable), med(labPunched, usable))
		punchedFirst := 0
		for _, s := range r.Link[labPunched] {
			if s.FirstOn == labPunched {
				punchedFirst++
			}
		}
		switch n := len(r.Link[labPunched]); {
		case punchedFirst == n:
			l += " Behind two home NATs, `peerfs status` read just after the first successful `ls` already showed the " +
				"punched path in every run: the PUNCH exchange over the fresh relayed link and the simultaneous open, " +
				"timed by round trips of tens of microseconds, take about as long as one poll."
		default:
			l += fmt.Sprintf(" Behind two home NATs the first usable link was relayed in %d of %d runs and the punched "+
				"path replaced it at %.0f ms (median).", n-punchedFirst, n, med(labPunched, onPath))
		}
		out = append(out, l)
	}
	if d, rl := r.Pull[labDirect], r.Pull[labRelayed]; len(d) > 0 && len(rl) > 0 {
		var ratio, relayCPU, puller, owner []float64
		for i, s := range rl {
			if i < len(d) {
				ratio = append(ratio, 100*s.MiBs/d[i].MiBs)
			}
			relayCPU = append(relayCPU, s.RelayCPUPerGiB)
			puller = append(puller, s.PullerCPUPerGiB)
			owner = append(owner, s.OwnerCPUPerGiB)
		}
		rm, _, _ := median(ratio)
		var punched []float64
		for i, s := range r.Pull[labPunched] {
			if i < len(d) {
				punched = append(punched, 100*s.MiBs/d[i].MiBs)
			}
		}
		rc, _, _ := median(relayCPU)
		pc, _, _ := median(puller)
		oc, _, _ := median(owner)
		goal := "meets the goal of 80%"
		if rm < 80 {
			goal = "misses the goal of 80%"
		}
		var relayedMiBs []float64
		for _, s := range rl {
			relayedMiBs = append(relayedMiBs, s.MiBs)
		}
		rmb, _, _ := median(relayedMiBs)
		_, rlo, rhi := median(ratio)
		out = append(out, fmt.Sprintf("**The relay splices, the devices encrypt.** Relayed pulls reach %.0f%% of the "+
			"same round's direct pull (%.0f-%.0f%%), which %s. The relay spent %.2f core-s per GiB spliced (splice(2) "+
			"moves the ciphertext between its two sockets in the kernel: no copy to user space, no cipher), against "+
			"%.2f for the puller's daemon and %.2f for the owner's, which run TLS, the protocol and the disk; at the "+
			"relayed pull's %.0f MiB/s that is %.0f%% of one core. A relayed pull's packets also go further: six veth "+
			"hops, four forwarding passes (cgnat, the internet twice, home1) and two TCP connections, against three "+
			"veth hops and two forwarding passes (the internet, home1) for the direct pull. A veth hop copies no "+
			"data, but each one runs the receiving side's network stack (routing, netfilter, NAT) in softirq, on the "+
			"same two cores as both daemons, the relay and the rest of the machine's load, and the rounds spread with "+
			"that load. Punched pulls, plain TCP across both NATs (four veth hops, three forwarding passes), "+
			"reach %.0f%%. On a real network the relay is another machine and its cost per GiB is the figure that "+
			"carries over.", rm, rlo, rhi, goal, rc, pc, oc, rmb, 100*rc*rmb/1024, first(median(punched))))
	}
	if len(r.Cut) > 0 {
		var serve []float64
		for _, s := range r.Cut {
			serve = append(serve, s.ServingMs/1000)
		}
		m, _, _ := median(serve)
		out = append(out, fmt.Sprintf("**A dead path costs the kernel's timeout.** After the cut the mount's next READ "+
			"goes out on the punched connection and is never acknowledged; the kernel retransmits and gives the "+
			"connection up once data has waited TCP_USER_TIMEOUT (%.0f s, internal/node/deadpath_linux.go). Then the link "+
			"ends, the dial loop goes to the relay (after the direct candidates' 1 s head start at most), a relayed link "+
			"comes up in milliseconds and the request is retried on it. So the %.1f s median is the %.0f s timeout plus "+
			"%.1f s of fallback; without the timeout the keepalive would notice only after 30 s of silence.",
			deadPathTimeout.Seconds(), m, deadPathTimeout.Seconds(), m-deadPathTimeout.Seconds()))
	}
	return out
}
