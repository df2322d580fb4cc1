package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/relay"
	"github.com/peerfs/peerfs/internal/transport"
)

// The reach benchmark: one stream of --size bytes from one device's TLS (internal/transport)
// to the other's, directly over loopback TCP and through a "peerfs relay serve" process by
// raw TLS (spliced in the kernel) and by WebSocket inside TLS. Rounds run every path once,
// so changes in the machine's load hit all of them. The relay's CPU is read from
// /proc/PID/stat around each transfer (clock ticks, 10 ms). Then the same binaries in a lab
// of network namespaces behind NAT routers (reach_lab.go), unless --lab=false; without root
// the lab part is skipped with a message.

const (
	reachDirect = "direct (loopback TCP)"
	reachTLS    = "relayed, raw TLS (spliced)"
	reachWS     = "relayed, WebSocket inside TLS"
)

type reachSample struct {
	MiBs           float64 `json:"mib_s"`
	SetupMs        float64 `json:"setup_ms"`                      // connect to a verified inner TLS link
	RelayCPUPerGiB float64 `json:"relay_cpu_s_per_gib,omitempty"` // relay process, user + system
}

type reachReport struct {
	Machine string                   `json:"machine"`
	Size    int64                    `json:"size"`
	Runs    int                      `json:"runs"`
	Paths   map[string][]reachSample `json:"paths"`
	Lab     *labReport               `json:"lab,omitempty"`
}

// The reach suite's own flags.
var reachFlags struct {
	loopback bool
	lab      bool
	labSize  string
	labRuns  int
	cutRuns  int
}

func init() {
	register(&suite{
		name:  "reach",
		usage: "[--size 1GiB] [--runs 3] [--lab=true] [--lab-size 1GiB] [--lab-runs 5] [--cut-runs 3] [--loopback=true]",
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&reachFlags.loopback, "loopback", true, "measure the streams on loopback")
			fs.BoolVar(&reachFlags.lab, "lab", true, "measure in a network-namespace lab (needs root; skipped otherwise)")
			fs.StringVar(&reachFlags.labSize, "lab-size", "1GiB", "the file pulled in the lab (1 GiB: a second a pull, 100 CPU ticks per core)")
			fs.IntVar(&reachFlags.labRuns, "lab-runs", 5, "lab rounds of link-up and pull")
			fs.IntVar(&reachFlags.cutRuns, "cut-runs", 3, "lab runs of the direct path cut under a mount")
		},
		quick: func(set map[string]bool) {
			if !set["lab-size"] {
				reachFlags.labSize = "16MiB"
			}
			if !set["lab-runs"] {
				reachFlags.labRuns = 1
			}
			if !set["cut-runs"] {
				reachFlags.cutRuns = 1
			}
		},
		run: runReach,
	})
}

func runReach(ctx context.Context, o commonOptions) (*Section, error) {
	labSize, err := parseSize(reachFlags.labSize)
	if err != nil || labSize <= 0 || reachFlags.labRuns < 1 || reachFlags.cutRuns < 1 {
		return nil, fmt.Errorf("bad --lab-size %q, --lab-runs %d or --cut-runs %d", reachFlags.labSize, reachFlags.labRuns, reachFlags.cutRuns)
	}
	r := reachReport{Machine: machine(), Size: o.Size, Runs: o.Runs, Paths: map[string][]reachSample{}}
	if reachFlags.loopback {
		if err := runReachLoopback(ctx, o, &r); err != nil {
			return nil, err
		}
	}
	if reachFlags.lab {
		bin, err := filepath.Abs(o.Peerfs)
		if err != nil {
			return nil, err
		}
		lab, err := runReachLab(ctx, bin, labSize, reachFlags.labRuns, reachFlags.cutRuns)
		if err != nil {
			return nil, err
		}
		if lab.Skipped != "" {
			fmt.Println("reach: the lab part is skipped:", lab.Skipped)
		}
		r.Lab = &lab
	}
	return reachSection(r), nil
}

func runReachLoopback(ctx context.Context, o commonOptions, r *reachReport) error {
	home, err := os.MkdirTemp("", "peerfs-bench-relay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	cmd := exec.CommandContext(ctx, o.Peerfs, "relay", "serve", "--home", home, "--listen", "127.0.0.1:0", "--json", "-q")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the relay (%s): %w", o.Peerfs, err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the relay's URL: %w", err)
	}
	var first struct{ URL string }
	if err := json.Unmarshal([]byte(line), &first); err != nil {
		return fmt.Errorf("the relay's first line %q: %w", line, err)
	}
	u, err := relay.ParseURL(first.URL)
	if err != nil {
		return err
	}

	for run := 1; run <= o.Runs; run++ {
		for _, path := range []string{reachDirect, reachTLS, reachWS} {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s, err := reachOnce(ctx, path, u, cmd.Process.Pid, o.Size)
			if err != nil {
				return fmt.Errorf("%s, run %d: %w", path, run, err)
			}
			fmt.Printf("run %d  %-32s %8.0f MiB/s  setup %6.1f ms  relay %.3f core-s/GiB\n", run, path, s.MiBs, s.SetupMs, s.RelayCPUPerGiB)
			r.Paths[path] = append(r.Paths[path], s)
		}
	}
	return nil
}

// reachOnce links two fresh devices by path and moves size bytes one way.
func reachOnce(ctx context.Context, path string, u relay.URL, relayPID int, size int64) (reachSample, error) {
	a, err := identity.Generate()
	if err != nil {
		return reachSample{}, err
	}
	b, err := identity.Generate()
	if err != nil {
		return reachSample{}, err
	}
	trust := func(id *identity.Identity) func() []identity.DeviceID {
		return func() []identity.DeviceID { return []identity.DeviceID{id.ID} }
	}
	ca := &transport.Config{Identity: a, Trusted: trust(b)}
	cb := &transport.Config{Identity: b, Trusted: trust(a)}

	start := time.Now()
	var ra, rb net.Conn
	switch path {
	case reachDirect:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return reachSample{}, err
		}
		acc := make(chan net.Conn, 1)
		go func() {
			c, _ := ln.Accept()
			acc <- c
		}()
		if rb, err = net.Dial("tcp", ln.Addr().String()); err != nil {
			ln.Close()
			return reachSample{}, err
		}
		ra = <-acc
		ln.Close()
	default:
		opts := &relay.Options{}
		if path == reachWS {
			opts.Transport = relay.TransportWebSocket
		}
		listening := make(chan error, 1)
		go func() {
			s, err := relay.Dial(ctx, u, relay.RoleListen, relay.ListenIDs(a.ID, []identity.DeviceID{b.ID}, time.Now()), opts)
			if err == nil {
				ra = s
			}
			listening <- err
		}()
		s, err := relay.Dial(ctx, u, relay.RoleDial, []relay.ID{relay.DialID(b.ID, a.ID, time.Now())}, opts)
		if err != nil {
			return reachSample{}, err
		}
		rb = s
		if err := <-listening; err != nil {
			rb.Close()
			return reachSample{}, err
		}
	}
	srv := make(chan error, 1)
	var ta *transport.Conn
	go func() {
		var err error
		ta, err = transport.Server(ctx, ra, ca)
		srv <- err
	}()
	tb, err := transport.Client(ctx, rb, cb, a.ID)
	if err != nil {
		ra.Close()
		return reachSample{}, err
	}
	if err := <-srv; err != nil {
		tb.Close()
		return reachSample{}, err
	}
	defer ta.Close()
	defer tb.Close()
	setup := time.Since(start)

	cpu0, err := procCPU(relayPID)
	if err != nil {
		return reachSample{}, err
	}
	t0 := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := io.CopyN(io.Discard, ta, size)
		done <- err
	}()
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		n := min(left, int64(len(buf)))
		if _, err := tb.Write(buf[:n]); err != nil {
			return reachSample{}, err
		}
	}
	if err := <-done; err != nil {
		return reachSample{}, err
	}
	el := time.Since(t0)
	cpu1, err := procCPU(relayPID)
	if err != nil {
		return reachSample{}, err
	}
	s := reachSample{MiBs: mibs(size, el.Seconds()), SetupMs: float64(setup.Microseconds()) / 1000}
	if path != reachDirect {
		s.RelayCPUPerGiB = (cpu1 - cpu0).Seconds() / (float64(size) / (1 << 30))
	}
	return s, nil
}

// procCPU is a process's user plus system time from /proc/PID/stat (Linux), in clock ticks
// of 1/100 s (USER_HZ).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the relay's CPU time: %w", err)
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime or stime", pid)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

func reachSection(r reachReport) *Section {
	var b strings.Builder
	title := "Reach: relayed against direct"
	if len(r.Paths) > 0 {
		b.WriteString("### On loopback\n\n")
		reachLoopbackMarkdown(&b, r)
		title += ", on loopback"
	}
	if r.Lab != nil {
		if len(r.Paths) > 0 {
			b.WriteString("\n")
		}
		b.WriteString("### In a lab of network namespaces behind NAT routers\n\n")
		if r.Lab.Skipped != "" {
			fmt.Fprintf(&b, "Not measured on this machine: %s.\n", r.Lab.Skipped)
		} else {
			labMarkdown(&b, *r.Lab)
			if len(r.Paths) > 0 {
				title += " and"
			}
			title += " in a NAT lab"
		}
	}
	return &Section{Title: title, Markdown: b.String(), Raw: r}
}

func reachLoopbackMarkdown(b *strings.Builder, r reachReport) {
	fmt.Fprintf(b, "One stream of %s from one device's TLS to the other's, on loopback: directly, and "+
		"through a `peerfs relay serve` process by raw TLS (the relay splices the two TCP sockets in "+
		"the kernel) and by WebSocket inside the relay's TLS (a user-space copy and the relay's cipher). "+
		"%d rounds, each running every path once; medians with min-max. \"of direct\" compares each "+
		"round's relayed figure with the same round's direct one. Relay CPU is the relay process's "+
		"user + system time during the transfer, from /proc (10 ms ticks). Setup is from the first "+
		"connect to a verified link between the devices (relay join and pairing included).\n\n", spelledSize(r.Size), r.Runs)
	b.WriteString("| path | MiB/s | of direct | relay core-s/GiB | setup ms |\n|---|---|---|---|---|\n")
	direct := r.Paths[reachDirect]
	for _, path := range []string{reachDirect, reachTLS, reachWS} {
		ss := r.Paths[path]
		var mb, cpu, setup, ratio []float64
		for i, s := range ss {
			mb = append(mb, s.MiBs)
			cpu = append(cpu, s.RelayCPUPerGiB)
			setup = append(setup, s.SetupMs)
			if i < len(direct) {
				ratio = append(ratio, 100*s.MiBs/direct[i].MiBs)
			}
		}
		m, lo, hi := median(mb)
		row := fmt.Sprintf("| %s | %.0f (%.0f-%.0f) | ", path, m, lo, hi)
		if path == reachDirect {
			row += "— | — | "
		} else {
			rm, rlo, rhi := median(ratio)
			cm, clo, chi := median(cpu)
			row += fmt.Sprintf("%.0f%% (%.0f-%.0f) | %.3f (%.3f-%.3f) | ", rm, rlo, rhi, cm, clo, chi)
		}
		sm, slo, shi := median(setup)
		row += fmt.Sprintf("%.1f (%.1f-%.1f) |\n", sm, slo, shi)
		b.WriteString(row)
	}
	b.WriteString("\nThe devices and the relay share the machine's cores, so on loopback the relayed throughput " +
		"measures the machine as much as the relay; the relay's CPU per GiB is the figure that carries over " +
		"to a real network.\n")
}
