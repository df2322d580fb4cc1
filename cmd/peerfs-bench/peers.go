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
)

// peers are two real daemons: alpha exports the source folder, beta pulls from it.
type peers struct {
	bin        string
	homeA      string
	homeB      string
	procs      []*exec.Cmd
	size       int64
	clockTicks float64
}

func (p *peers) cli(home string, args ...string) ([]byte, error) {
	cmd := exec.Command(p.bin, append([]string{"--home", home}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("peerfs %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

func startPeers(ctx context.Context, o linkOptions, src string) (*peers, error) {
	bin, err := filepath.Abs(o.Peerfs)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("peerfs binary: %w (build it with \"make build\" or pass --peerfs)", err)
	}
	fi, _ := os.Stat(filepath.Join(src, "big.bin"))
	p := &peers{bin: bin, homeA: filepath.Join(o.Dir, "alpha"), homeB: filepath.Join(o.Dir, "beta"), size: fi.Size(), clockTicks: 100}
	for _, h := range []struct{ home, name string }{{p.homeA, "alpha"}, {p.homeB, "beta"}} {
		os.RemoveAll(h.home)
		if _, err := p.cli(h.home, "init", "--name", h.name); err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "--home", h.home, "daemon", "--listen", "127.0.0.1:0")
		if dir := os.Getenv("PEERFS_BENCH_PROFILE_DIR"); dir != "" {
			cmd.Env = append(os.Environ(), "PEERFS_CPUPROFILE="+filepath.Join(dir, h.name+".cpu"))
		}
		logf, _ := os.Create(h.home + ".log")
		cmd.Stderr = logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		p.procs = append(p.procs, cmd)
	}
	addr, err := p.waitListen(p.homeA)
	if err != nil {
		p.stop()
		return nil, err
	}
	if _, err := p.waitListen(p.homeB); err != nil {
		p.stop()
		return nil, err
	}
	idA, _ := p.cli(p.homeA, "id")
	idB, _ := p.cli(p.homeB, "id")
	steps := [][]string{
		{p.homeA, "peer", "add", strings.TrimSpace(string(idB)), "--name", "beta"},
		{p.homeB, "peer", "add", strings.TrimSpace(string(idA)), "--name", "alpha", "--addr", addr},
		{p.homeA, "share", "add", "bench", src, "--read-only", "--peer", "beta"},
	}
	for _, s := range steps {
		if _, err := p.cli(s[0], s[1:]...); err != nil {
			p.stop()
			return nil, err
		}
	}
	return p, nil
}

// waitListen waits for a daemon's control socket and returns its peer address.
func (p *peers) waitListen(home string) (string, error) {
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
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *peers) stop() {
	for _, c := range p.procs {
		c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range p.procs {
		c.Wait()
	}
	p.procs = nil
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
func (p *peers) pullOnce(ctx context.Context, dest string) (sample, error) {
	os.RemoveAll(dest)
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dest)
	cpu0 := 0.0
	for _, c := range p.procs {
		cpu0 += p.procCPU(c.Process.Pid)
	}
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
	cpu1 := 0.0
	for _, c := range p.procs {
		cpu1 += p.procCPU(c.Process.Pid)
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	var done struct {
		Type    string
		Bytes   int64
		Elapsed float64 `json:"elapsed_seconds"`
	}
	if err := json.Unmarshal(lines[len(lines)-1], &done); err != nil || done.Type != "done" || done.Bytes != p.size {
		return sample{}, fmt.Errorf("unexpected pull result %s", lines[len(lines)-1])
	}
	// The CLI's wall time includes its start-up and the stream set-up, as a user sees it.
	return sample{Seconds: secs, CPUSeconds: cpu1 - cpu0, RSSMiB: rss}, nil
}
