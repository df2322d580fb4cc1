package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The discover benchmark: two devices that trust each other by device ID, with no address
// configured, each in a network namespace of its own on one bridge; the time from starting
// both daemons to a linked peer, found by LAN discovery (mDNS). Two networks: IPv4, and IPv6
// with link-local addresses only. Each run starts both daemons afresh in the same homes.
// Needs root (CAP_NET_ADMIN) and iproute2; the namespaces are deleted at the end.

const (
	discoverV4 = "IPv4"
	discoverV6 = "IPv6 link-local only"
)

type discoverSample struct {
	UpMs     float64 `json:"up_ms"`     // start → both control sockets answer
	LinkedMs float64 `json:"linked_ms"` // start → both see the other connected
}

type discoverReport struct {
	Machine  string                      `json:"machine"`
	Runs     int                         `json:"runs"`
	Networks map[string][]discoverSample `json:"networks"`
}

func init() {
	register(&suite{
		name:  "discover",
		usage: "[--runs 3]",
		run:   runDiscover,
	})
}

func runDiscover(ctx context.Context, o commonOptions) (*Section, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the discover benchmark makes network namespaces: run it as root")
	}
	peerfs, err := filepath.Abs(o.Peerfs)
	if err != nil {
		return nil, err
	}
	r := discoverReport{Machine: machine(), Runs: o.Runs, Networks: map[string][]discoverSample{}}
	for _, network := range []string{discoverV4, discoverV6} {
		ss, err := discoverNetwork(ctx, peerfs, network, o.Runs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", network, err)
		}
		r.Networks[network] = ss
	}
	return discoverSection(r), nil
}

// benchLAN is a bridge in a namespace of its own and hosts on it, one namespace each.
type benchLAN struct {
	prefix string
	nss    []string
}

func (l *benchLAN) ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (l *benchLAN) in(ns string, args ...string) error {
	return l.ip(append([]string{"netns", "exec", ns}, args...)...)
}

func (l *benchLAN) addNS(name string, v6 bool) (string, error) {
	ns := l.prefix + name
	if err := l.ip("netns", "add", ns); err != nil {
		return "", err
	}
	l.nss = append(l.nss, ns)
	disable := "1"
	if v6 {
		disable = "0"
	}
	return ns, errors.Join(
		l.ip("-n", ns, "link", "set", "lo", "up"),
		l.in(ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6="+disable, "net.ipv6.conf.default.disable_ipv6="+disable,
			"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"))
}

// newBenchLAN builds the bridge and n hosts; host i has eth0, at 10.99.0.(i+2)/24 unless v6,
// where it keeps only its IPv6 link-local address.
func newBenchLAN(n int, v6 bool) (*benchLAN, []string, error) {
	l := &benchLAN{prefix: fmt.Sprintf("pfbd%d-", os.Getpid())}
	br, err := l.addNS("br", false)
	if err != nil {
		return l, nil, err
	}
	if err := errors.Join(
		l.ip("-n", br, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"),
		l.ip("-n", br, "link", "set", "br0", "up")); err != nil {
		return l, nil, err
	}
	var hosts []string
	for i := range n {
		ns, err := l.addNS(fmt.Sprintf("h%d", i), v6)
		if err != nil {
			return l, nil, err
		}
		port := fmt.Sprintf("p%d", i)
		steps := []error{
			l.ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", br),
			l.ip("-n", br, "link", "set", port, "master", "br0"),
			l.ip("-n", br, "link", "set", port, "up"),
		}
		if !v6 {
			steps = append(steps, l.ip("-n", ns, "addr", "add", fmt.Sprintf("10.99.0.%d/24", i+2), "dev", "eth0"))
		}
		steps = append(steps, l.ip("-n", ns, "link", "set", "eth0", "up"))
		if err := errors.Join(steps...); err != nil {
			return l, nil, err
		}
		hosts = append(hosts, ns)
	}
	return l, hosts, nil
}

func (l *benchLAN) close() {
	for _, ns := range l.nss {
		out, _ := exec.Command("ip", "netns", "pids", ns).Output()
		for _, f := range strings.Fields(string(out)) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		exec.Command("ip", "netns", "del", ns).Run()
	}
}

// discoverNetwork measures runs starts of two daemons on one network.
func discoverNetwork(ctx context.Context, peerfs, network string, runs int) ([]discoverSample, error) {
	lan, hosts, err := newBenchLAN(2, network == discoverV6)
	defer lan.close()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "peerfs-bench-discover-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	homes := []string{filepath.Join(dir, "alpha"), filepath.Join(dir, "beta")}
	ids := make([]string, 2)
	for i, h := range homes {
		if _, err := peerfsOut(peerfs, h, "init", "--name", filepath.Base(h)); err != nil {
			return nil, err
		}
		id, err := peerfsOut(peerfs, h, "id")
		if err != nil {
			return nil, err
		}
		ids[i] = strings.TrimSpace(id)
	}
	for i, h := range homes {
		other := homes[1-i]
		if _, err := peerfsOut(peerfs, h, "peer", "add", ids[1-i], "--name", filepath.Base(other)); err != nil {
			return nil, err
		}
	}
	var out []discoverSample
	for run := 1; run <= runs; run++ {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s, err := discoverOnce(ctx, peerfs, hosts, homes)
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", run, err)
		}
		fmt.Printf("run %d  %-22s up %7.1f ms  linked %7.1f ms\n", run, network, s.UpMs, s.LinkedMs)
		out = append(out, s)
	}
	return out, nil
}

// discoverOnce starts both daemons, waits until each sees the other connected, and stops them.
func discoverOnce(ctx context.Context, peerfs string, hosts, homes []string) (discoverSample, error) {
	start := time.Now()
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			c.Process.Signal(syscall.SIGTERM)
			c.Wait()
		}
	}()
	for i, h := range homes {
		c := exec.Command("ip", "netns", "exec", hosts[i], peerfs, "--home", h, "daemon", "--listen", ":7462")
		if err := c.Start(); err != nil {
			return discoverSample{}, err
		}
		cmds = append(cmds, c)
	}
	var s discoverSample
	up := make([]bool, len(homes))
	linked := make([]bool, len(homes))
	deadline := start.Add(30 * time.Second)
	for {
		all := true
		for i, h := range homes {
			if linked[i] {
				continue
			}
			st, err := peerfsOut(peerfs, h, "status", "--json")
			if err != nil {
				all = false
				continue
			}
			up[i] = true
			var res struct {
				Peers []struct{ Connected bool } `json:"peers"`
			}
			if json.Unmarshal([]byte(st), &res) == nil && len(res.Peers) == 1 && res.Peers[0].Connected {
				linked[i] = true
			} else {
				all = false
			}
		}
		if s.UpMs == 0 && !slices.Contains(up, false) {
			s.UpMs = float64(time.Since(start).Microseconds()) / 1000
		}
		if all {
			s.LinkedMs = float64(time.Since(start).Microseconds()) / 1000
			return s, nil
		}
		if time.Now().After(deadline) {
			return s, errors.New("the daemons did not link within 30 s")
		}
		if ctx.Err() != nil {
			return s, ctx.Err()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func peerfsOut(peerfs, home string, args ...string) (string, error) {
	out, err := exec.Command(peerfs, append([]string{"--home", home}, args...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("peerfs %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", err
	}
	return string(out), nil
}

func discoverSection(r discoverReport) *Section {
	var b strings.Builder
	fmt.Fprintf(&b, "Two devices that trust each other by device ID, with no address configured, each in a "+
		"network namespace of its own on one Linux bridge (veth): the time from starting both `peerfs daemon` "+
		"processes to each seeing the other connected, the link found by LAN discovery (mDNS, "+
		"docs/PROTOCOL.md section 16). \"Up\" is from the start until both control sockets answer, the "+
		"daemons' own start. Both are polled with `peerfs status --json`, one process per device and poll, "+
		"so they resolve to 10-20 ms, and \"up\" often equals \"linked\": by the poll that finds both "+
		"daemons up they have linked. %d runs per network, medians with min-max.\n\n", r.Runs)
	b.WriteString("| network | up ms | linked ms |\n|---|---|---|\n")
	for _, network := range []string{discoverV4, discoverV6} {
		var up, linked []float64
		for _, s := range r.Networks[network] {
			up = append(up, s.UpMs)
			linked = append(linked, s.LinkedMs)
		}
		um, ulo, uhi := median(up)
		lm, llo, lhi := median(linked)
		fmt.Fprintf(&b, "| %s | %.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) |\n", network, um, ulo, uhi, lm, llo, lhi)
	}
	b.WriteString("\nA daemon announces itself and asks the network as soon as its sockets open, so whichever " +
		"starts second hears the first at once and is heard by it: linking costs one mDNS exchange and a " +
		"TLS handshake after the daemons are up.\n")
	return &Section{
		Title:    "Discover: from daemon start to a peer found on the LAN and linked",
		Markdown: b.String(),
		Raw:      r,
	}
}
