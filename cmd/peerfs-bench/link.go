package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
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
}

func init() {
	register(&suite{
		name:  "link",
		usage: "[--size 1GiB] [--runs 3]",
		run: func(ctx context.Context, o commonOptions) (*Section, error) {
			return nil, runLink(ctx, o)
		},
	})
}

func runLink(ctx context.Context, o commonOptions) error {
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "peerfs-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		o.Dir = d
	}
	src := filepath.Join(o.Dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	file := filepath.Join(src, "big.bin")
	fmt.Fprintf(os.Stderr, "writing a %d MiB test file...\n", o.Size>>20)
	if err := writeRandom(file, o.Size); err != nil {
		return err
	}
	peers, err := startPeers(ctx, o.Peerfs, o.Dir, src, true)
	if err != nil {
		return err
	}
	defer peers.stop()

	paths := []struct {
		name string
		run  func(context.Context, int) (sample, error)
	}{
		{"plain TCP", func(context.Context, int) (sample, error) { return streamOnce(o.Size, tcpPair) }},
		{"bare TLS 1.3 (crypto/tls)", func(context.Context, int) (sample, error) { return streamOnce(o.Size, tlsPair) }},
		{"peerfs transport (TLS + coalescing)", func(context.Context, int) (sample, error) { return streamOnce(o.Size, transportPair) }},
		{"native cp (same disk)", func(_ context.Context, i int) (sample, error) {
			return cpOnce(file, filepath.Join(o.Dir, fmt.Sprint("cp-", i)))
		}},
		{"peerfs pull", func(ctx context.Context, i int) (sample, error) {
			return peers.pullOnce(ctx, filepath.Join(o.Dir, fmt.Sprint("pull-", i)), o.Size)
		}},
	}
	rep := report{Machine: machine(), Size: o.Size, Runs: o.Runs}
	for _, p := range paths {
		rep.Paths = append(rep.Paths, pathResult{Name: p.name})
	}
	for i := 0; i < o.Runs; i++ {
		for j, p := range paths {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s, err := p.run(ctx, i)
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			fmt.Fprintf(os.Stderr, "run %d %-38s %8.0f MiB/s\n", i+1, p.name, mibs(o.Size, s.Seconds))
			rep.Paths[j].Samples = append(rep.Paths[j].Samples, s)
		}
	}
	printReport(os.Stdout, rep)
	if o.Out != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		return os.WriteFile(o.Out, append(b, '\n'), 0o644)
	}
	return nil
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

func printReport(w io.Writer, r report) {
	fmt.Fprintf(w, "\n%s; %d MiB per run, %d runs, medians (min-max)\n\n", r.Machine, r.Size>>20, r.Runs)
	fmt.Fprintln(w, "| path | MiB/s | CPU s/GiB | vs plain TCP | vs bare TLS |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	rate := func(p pathResult) (float64, float64, float64) {
		var xs []float64
		for _, s := range p.Samples {
			xs = append(xs, mibs(r.Size, s.Seconds))
		}
		return median(xs)
	}
	tcp, _, _ := rate(r.Paths[0])
	tls, _, _ := rate(r.Paths[1])
	var rss []float64
	for _, p := range r.Paths {
		med, lo, hi := rate(p)
		var cpu []float64
		for _, s := range p.Samples {
			cpu = append(cpu, s.CPUSeconds/(float64(r.Size)/(1<<30)))
			if s.RSSMiB > 0 {
				rss = append(rss, s.RSSMiB)
			}
		}
		c, _, _ := median(cpu)
		fmt.Fprintf(w, "| %s | %.0f (%.0f-%.0f) | %.2f | %.2f | %.2f |\n", p.Name, med, lo, hi, c, med/tcp, med/tls)
	}
	if len(rss) > 0 {
		_, _, hi := median(rss)
		fmt.Fprintf(w, "\npeak daemon RSS during the pulls: %.0f MiB\n", hi)
	}
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

func trustAll(identity.DeviceID) bool { return true }

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
