package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
)

// The pair benchmark: the time from "peerfs pair CODE" to a trusted peer (the command has
// returned) and to a connected one (the joiner's daemon reports the link up), between two
// daemons of the built binary on loopback. Each run starts two fresh homes and daemons, has
// alpha show a code, then times beta completing it, once with --addr and once finding
// alpha by LAN discovery (which a daemon listening on loopback runs on the loopback
// interface). Rounds run both ways once, so load changes hit both.

const (
	pairByAddr = "with --addr"
	pairByLAN  = "found by LAN discovery"
)

type pairSample struct {
	TrustedMs   float64 `json:"trusted_ms"`   // "peerfs pair CODE" started → it returned, paired
	ConnectedMs float64 `json:"connected_ms"` // same start → the joiner's link to the peer is up
}

type pairReport struct {
	Machine string                  `json:"machine"`
	Runs    int                     `json:"runs"`
	Ways    map[string][]pairSample `json:"ways"`
}

func init() {
	register(&suite{
		name:  "pair",
		usage: "[--runs 3]",
		run:   runPair,
	})
}

func runPair(ctx context.Context, o commonOptions) (*Section, error) {
	r := pairReport{Machine: machine(), Runs: o.Runs, Ways: map[string][]pairSample{}}
	for run := 1; run <= o.Runs; run++ {
		for _, way := range []string{pairByAddr, pairByLAN} {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			s, err := pairOnce(ctx, o, way)
			if err != nil {
				return nil, fmt.Errorf("%s, run %d: %w", way, run, err)
			}
			fmt.Printf("run %d  %-24s trusted %7.1f ms  connected %7.1f ms\n", run, way, s.TrustedMs, s.ConnectedMs)
			r.Ways[way] = append(r.Ways[way], s)
		}
	}
	return pairSection(r), nil
}

// pairOnce pairs two fresh daemons and times the joining side.
func pairOnce(ctx context.Context, o commonOptions, way string) (pairSample, error) {
	dir, err := os.MkdirTemp(o.Dir, "peerfs-bench-pair-")
	if err != nil {
		return pairSample{}, err
	}
	defer os.RemoveAll(dir)
	bin, err := filepath.Abs(o.Peerfs)
	if err != nil {
		return pairSample{}, err
	}
	p := &peers{bin: bin, homeA: filepath.Join(dir, "alpha"), homeB: filepath.Join(dir, "beta"), clockTicks: 100, discovery: true}
	defer p.stop()
	for i, h := range []struct{ home, name string }{{p.homeA, "alpha"}, {p.homeB, "beta"}} {
		if _, err := p.cli(h.home, "init", "--name", h.name); err != nil {
			return pairSample{}, err
		}
		if err := p.startDaemon(i); err != nil {
			return pairSample{}, err
		}
	}
	addrA, err := p.waitListen(ctx, p.homeA)
	if err != nil {
		return pairSample{}, err
	}
	if _, err := p.waitListen(ctx, p.homeB); err != nil {
		return pairSample{}, err
	}

	// Alpha shows a code.
	show := exec.CommandContext(ctx, bin, "--home", p.homeA, "--json", "pair")
	out, err := show.StdoutPipe()
	if err != nil {
		return pairSample{}, err
	}
	show.Stderr = os.Stderr
	show.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := show.Start(); err != nil {
		return pairSample{}, err
	}
	defer show.Wait()
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		return pairSample{}, fmt.Errorf("peerfs pair on alpha printed no code")
	}
	var first struct{ Code string }
	if err := json.Unmarshal(lines.Bytes(), &first); err != nil || first.Code == "" {
		return pairSample{}, fmt.Errorf("peerfs pair on alpha: first line %q", lines.Text())
	}
	go func() {
		for lines.Scan() {
		}
	}()

	paths, err := config.ResolvePaths(p.homeB)
	if err != nil {
		return pairSample{}, err
	}
	args := []string{"pair", first.Code}
	if way == pairByAddr {
		args = append(args, "--addr", addrA)
	}
	start := time.Now()
	if _, err := p.cli(p.homeB, args...); err != nil {
		return pairSample{}, err
	}
	s := pairSample{TrustedMs: ms(time.Since(start))}
	for {
		if connected(ctx, paths.Socket()) {
			s.ConnectedMs = ms(time.Since(start))
			return s, nil
		}
		if time.Since(start) > 30*time.Second {
			return s, fmt.Errorf("beta did not connect to alpha within 30 s of pairing")
		}
		time.Sleep(time.Millisecond)
	}
}

// connected reports whether the daemon at socket has a link up to a peer.
func connected(ctx context.Context, socket string) bool {
	c, err := api.Dial(socket)
	if err != nil {
		return false
	}
	defer c.Close()
	var st api.StatusResult
	if err := c.Call(ctx, api.MethodStatus, nil, &st, nil); err != nil {
		return false
	}
	return len(st.Peers) == 1 && st.Peers[0].Connected
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pairSection(r pairReport) *Section {
	var b strings.Builder
	fmt.Fprintf(&b, "Two daemons of the built binary on loopback, fresh homes each run: alpha runs `peerfs pair`, "+
		"then beta's `peerfs pair CODE` is timed from its start to its return (both devices trust each "+
		"other: TLS, CPace, confirmation, config written) and to beta's daemon reporting the link to alpha "+
		"up (polled through the control API every millisecond). With `--addr` beta dials the address "+
		"given; otherwise it looks the code's tag up by LAN discovery (mDNS on the loopback interface) "+
		"first. %d rounds, each pairing once with `--addr` and once by LAN discovery; medians with min-max.\n\n", r.Runs)
	b.WriteString("| way | to trusted, ms | to connected, ms |\n|---|---|---|\n")
	for _, way := range []string{pairByAddr, pairByLAN} {
		var trusted, conn []float64
		for _, s := range r.Ways[way] {
			trusted = append(trusted, s.TrustedMs)
			conn = append(conn, s.ConnectedMs)
		}
		tm, tlo, thi := median(trusted)
		cm, clo, chi := median(conn)
		fmt.Fprintf(&b, "| %s | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) |\n", way, tm, tlo, thi, cm, clo, chi)
	}
	b.WriteString("\nThe times include starting the `peerfs` process for the command and its call to the daemon. " +
		"Most of the difference between the two ways is LAN discovery's lookup, which waits 100 ms after the " +
		"first answer for more addresses of the same device (internal/discover, lookupGather).\n")
	return &Section{
		Title:    "Pairing: from `peerfs pair CODE` to a trusted, connected peer",
		Markdown: b.String(),
		Raw:      r,
	}
}
