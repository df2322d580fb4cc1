package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/peerfs/peerfs/internal/api"
)

// peers are two real daemons started from the built binary: alpha exports the source folder
// as share "bench" to beta, which pulls from it or mounts it. procs[0] is alpha, procs[1] beta.
type peers struct {
	bin        string
	homeA      string
	homeB      string
	procs      [2]*exec.Cmd
	starts     [2]int // how often each daemon was started, to name its profiles
	clockTicks float64
	// discovery leaves LAN discovery on. Off by default: two daemons on one machine hear
	// each other on the loopback interface and may link around the proxy a suite measures
	// through (the WAN suite's keepalive RTT then read 1 ms behind a 10 ms proxy).
	discovery bool
}

func (p *peers) cli(home string, args ...string) ([]byte, error) {
	cmd := exec.Command(p.bin, append([]string{"--home", home}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("peerfs %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// startPeers initialises two homes under dir, starts both daemons, makes them trust each
// other and exports src from alpha to beta as share "bench".
func startPeers(ctx context.Context, bin, dir, src string, readOnly bool) (*peers, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("peerfs binary: %w (build it with \"make build\" or pass --peerfs)", err)
	}
	p := &peers{bin: bin, homeA: filepath.Join(dir, "alpha"), homeB: filepath.Join(dir, "beta"), clockTicks: 100}
	for i, h := range []struct{ home, name string }{{p.homeA, "alpha"}, {p.homeB, "beta"}} {
		os.RemoveAll(h.home)
		os.Remove(h.home + ".log")
		if _, err := p.cli(h.home, "init", "--name", h.name); err != nil {
			p.stop()
			return nil, err
		}
		if err := p.startDaemon(i); err != nil {
			p.stop()
			return nil, err
		}
	}
	addr, err := p.waitListen(ctx, p.homeA)
	if err != nil {
		p.stop()
		return nil, err
	}
	if _, err := p.waitListen(ctx, p.homeB); err != nil {
		p.stop()
		return nil, err
	}
	idA, _ := p.cli(p.homeA, "id")
	idB, _ := p.cli(p.homeB, "id")
	share := []string{p.homeA, "share", "add", "bench", src, "--peer", "beta"}
	if readOnly {
		share = append(share, "--read-only")
	}
	steps := [][]string{
		{p.homeA, "peer", "add", strings.TrimSpace(string(idB)), "--name", "beta"},
		{p.homeB, "peer", "add", strings.TrimSpace(string(idA)), "--name", "alpha", "--addr", addr},
		share,
	}
	for _, s := range steps {
		if _, err := p.cli(s[0], s[1:]...); err != nil {
			p.stop()
			return nil, err
		}
	}
	return p, nil
}

// startDaemon starts daemon i (0 alpha, 1 beta), appending to its log. The daemon gets a
// process group of its own, so a ^C on the terminal reaches only this harness, which then
// unmounts and stops everything in order; Pdeathsig stops it should the harness die first.
func (p *peers) startDaemon(i int) error {
	home, name := p.homeA, "alpha"
	if i == 1 {
		home, name = p.homeB, "beta"
	}
	args := []string{"--home", home, "daemon", "--listen", "127.0.0.1:0"}
	if !p.discovery {
		args = append(args, "--no-discovery")
	}
	cmd := exec.Command(p.bin, args...)
	if p.starts[i]++; p.starts[i] > 1 {
		name = fmt.Sprintf("%s-%d", name, p.starts[i]) // beta.cpu, then beta-2.cpu, ...
	}
	if dir := os.Getenv("PEERFS_BENCH_PROFILE_DIR"); dir != "" {
		cmd.Env = append(os.Environ(), "PEERFS_CPUPROFILE="+filepath.Join(dir, name+".cpu"))
	}
	logf, err := os.OpenFile(home+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own copy
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	p.procs[i] = cmd
	return nil
}

// restartBeta stops beta's daemon, removes its chunk cache when wipe is set, and starts it
// again. Removing the cache directory under a running daemon does not work: the daemon keeps
// its cache store open across unmounts, and after the directory is gone a remounted file
// fails to open with ENOENT; so a cold cache takes a fresh daemon.
func (p *peers) restartBeta(ctx context.Context, wipe bool) error {
	if c := p.procs[1]; c != nil {
		c.Process.Signal(syscall.SIGTERM)
		c.Wait()
		p.procs[1] = nil
	}
	if wipe {
		// The daemon's cache directory (internal/node/mount.go: Paths.Cache/chunks; with
		// --home, Paths.Cache is HOME/cache).
		if err := os.RemoveAll(filepath.Join(p.homeB, "cache", "chunks")); err != nil {
			return err
		}
	}
	if err := p.startDaemon(1); err != nil {
		return err
	}
	_, err := p.waitListen(ctx, p.homeB)
	return err
}

// waitListen waits for a daemon's control socket and returns its peer address.
func (p *peers) waitListen(ctx context.Context, home string) (string, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := p.cli(home, "status", "--json")
		if err == nil {
			var st struct{ Listen string }
			if json.Unmarshal(out, &st) == nil && st.Listen != "" {
				return st.Listen, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("daemon for %s did not start: %v (log in %s.log)", home, err, home)
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *peers) stop() {
	for _, c := range p.procs {
		if c != nil {
			c.Process.Signal(syscall.SIGTERM)
		}
	}
	for i, c := range p.procs {
		if c != nil {
			c.Wait()
			p.procs[i] = nil
		}
	}
}

// cpu returns both daemons' user+system seconds so far.
func (p *peers) cpu() float64 {
	t := 0.0
	for _, c := range p.procs {
		if c != nil {
			t += p.procCPU(c.Process.Pid)
		}
	}
	return t
}

// procCPU returns user+system seconds of a process from /proc.
func (p *peers) procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / p.clockTicks
}

// procRSS returns a process's resident set in MiB.
func procRSS(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), "VmRSS:") {
			kb, _ := strconv.ParseFloat(strings.Fields(s.Text())[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// pullOnce runs "peerfs pull" of the test file into a fresh dest and times it, with the
// daemons' CPU and peak RSS sampled around it.
func (p *peers) pullOnce(ctx context.Context, dest string, size int64) (sample, error) {
	os.RemoveAll(dest)
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dest)
	cpu0 := p.cpu()
	stopRSS := make(chan struct{})
	peak := make(chan float64, 1)
	go func() {
		hi := 0.0
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			for _, c := range p.procs {
				hi = max(hi, procRSS(c.Process.Pid))
			}
			select {
			case <-stopRSS:
				peak <- hi
				return
			case <-t.C:
			}
		}
	}()
	t0 := time.Now()
	out, err := p.cli(p.homeB, "pull", "alpha:bench/big.bin", dest, "--json")
	secs := time.Since(t0).Seconds()
	close(stopRSS)
	rss := <-peak
	if err != nil {
		return sample{}, err
	}
	cpu1 := p.cpu()
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	var done struct {
		Type    string
		Bytes   int64
		Elapsed float64 `json:"elapsed_seconds"`
	}
	if err := json.Unmarshal(lines[len(lines)-1], &done); err != nil || done.Type != "done" || done.Bytes != size {
		return sample{}, fmt.Errorf("unexpected pull result %s", lines[len(lines)-1])
	}
	// The CLI's wall time includes its start-up and the stream set-up, as a user sees it.
	return sample{Seconds: secs, CPUSeconds: cpu1 - cpu0, RSSMiB: rss}, nil
}

// mount mounts alpha's share at dir through beta's daemon, as a user would.
func (p *peers) mount(dir string, flags ...string) error {
	_, err := p.cli(p.homeB, append(append([]string{"mount"}, flags...), "alpha:bench", dir)...)
	return err
}

// unmount unmounts a peerfs mount; when the daemon cannot (busy, or already gone), it falls
// back to a lazy fusermount3 so that no mount outlives the benchmark.
func (p *peers) unmount(dir string) error {
	if !mounted(dir) {
		return nil
	}
	_, err := p.cli(p.homeB, "unmount", dir)
	if err != nil && mounted(dir) {
		if out, lerr := exec.Command("fusermount3", "-u", "-z", dir).CombinedOutput(); lerr != nil {
			return fmt.Errorf("%v; fusermount3 -u -z: %v %s", err, lerr, out)
		}
	}
	return err
}

// stats returns a mount's per-operation counters ("peerfs stats DIR --json").
func (p *peers) stats(dir string) (api.StatsResult, error) {
	var st api.StatsResult
	out, err := p.cli(p.homeB, "stats", dir, "--json")
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return st, fmt.Errorf("peerfs stats --json: %w", err)
	}
	return st, nil
}

// bytesIn returns the frame bytes beta has received from peer name on their current link
// ("peerfs status --json").
func (p *peers) bytesIn(name string) (int64, error) {
	var st api.StatusResult
	out, err := p.cli(p.homeB, "status", "--json")
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return 0, fmt.Errorf("peerfs status --json: %w", err)
	}
	for _, pe := range st.Peers {
		if pe.Name == name && pe.Connected {
			return int64(pe.BytesIn), nil
		}
	}
	return 0, fmt.Errorf("beta is not connected to %s", name)
}

// op returns one operation's counters from a stats result; zero when absent.
func op(st api.StatsResult, name string) api.OpStats {
	for _, o := range st.Ops {
		if o.Name == name {
			return o
		}
	}
	return api.OpStats{}
}

// mounted reports whether dir is a mount point, from /proc/self/mountinfo.
func mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && unescapeMount(f[4]) == dir {
			return true
		}
	}
	return false
}

// unescapeMount undoes the octal escapes of /proc/self/mountinfo (space, tab, newline, \).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
