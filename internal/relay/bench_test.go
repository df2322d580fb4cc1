package relay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/netlab"
	"github.com/peerfs/peerfs/internal/transport"
)

// benchChildEnv makes the test binary a bare relay process (TestMain), so a benchmark can
// read the relay's own CPU time from its rusage.
const benchChildEnv = "PEERFS_RELAY_BENCH_CHILD"

func TestMain(m *testing.M) {
	netlab.Main() // a lab process (lab_linux_test.go) runs its function and exits here
	if os.Getenv(benchChildEnv) != "" {
		os.Exit(benchChild())
	}
	os.Exit(m.Run())
}

// benchChild serves a relay on loopback, prints its URL, and exits when stdin closes.
func benchChild() int {
	id, err := identity.Generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := New(Config{Identity: id})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go s.Serve(ln)
	fmt.Println(URL{Host: ln.Addr().String(), ID: id.ID})
	io.Copy(io.Discard, os.Stdin)
	s.Close()
	return 0
}

// startChildRelay runs a relay process; stop ends it and returns its CPU time.
func startChildRelay(b *testing.B) (URL, func() time.Duration) {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), benchChildEnv+"=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	u, err := ParseURL(line)
	if err != nil {
		b.Fatal(err)
	}
	return u, func() time.Duration {
		stdin.Close()
		cmd.Wait()
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
}

// BenchmarkRelay moves 1 MiB per op from one device's TLS to the other's: directly over
// loopback TCP, or through a relay process by raw TLS (spliced) or by WebSocket inside
// TLS. relay-cpu-s/GiB is the relay process's CPU time (user + system) per GiB moved.
//
//	flock /work/wt/.bench.lock go test -run XXX -bench BenchmarkRelay -benchtime 2048x -count 5 ./internal/relay/
func BenchmarkRelay(b *testing.B) {
	for _, tc := range []struct {
		name      string
		relayed   bool
		transport Transport
	}{
		{"direct", false, 0},
		{"relayed-tls", true, TransportTLS},
		{"relayed-websocket", true, TransportWebSocket},
	} {
		b.Run(tc.name, func(b *testing.B) {
			d := newDevices(b)
			var a, c *transport.Conn
			var stop func() time.Duration
			if tc.relayed {
				var u URL
				u, stop = startChildRelay(b)
				opts := &Options{Transport: tc.transport}
				a, c = pairTLSAt(b, u, d, opts)
			} else {
				a, c = pairDirect(b, d)
			}
			buf := make([]byte, 1<<20)
			done := make(chan error, 1)
			go func() {
				_, err := io.CopyN(io.Discard, a, int64(b.N)*int64(len(buf)))
				done <- err
			}()
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			a.Close()
			c.Close()
			if stop != nil {
				cpu := stop()
				b.ReportMetric(cpu.Seconds()/(float64(b.N)/1024), "relay-cpu-s/GiB")
			}
		})
	}
}

// BenchmarkRelayRaw is BenchmarkRelay without the devices' TLS: the ceiling of the relayed
// path itself, against plain loopback TCP.
//
//	flock /work/wt/.bench.lock go test -run XXX -bench BenchmarkRelayRaw -benchtime 4096x -count 5 ./internal/relay/
func BenchmarkRelayRaw(b *testing.B) {
	for _, relayed := range []bool{false, true} {
		name := "direct"
		if relayed {
			name = "relayed-tls"
		}
		b.Run(name, func(b *testing.B) {
			var a, c net.Conn
			var stop func() time.Duration
			if relayed {
				var u URL
				u, stop = startChildRelay(b)
				d := newDevices(b)
				ctx := context.Background()
				la := dialAsync(ctx, u, RoleListen, ListenIDs(d.a.ID, []identity.DeviceID{d.b.ID}, time.Now()), nil)
				sb, err := Dial(ctx, u, RoleDial, []ID{DialID(d.b.ID, d.a.ID, time.Now())}, nil)
				if err != nil {
					b.Fatal(err)
				}
				ra := <-la
				if ra.err != nil {
					b.Fatal(ra.err)
				}
				a, c = ra.sess, sb
			} else {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				acc := make(chan net.Conn, 1)
				go func() {
					x, _ := ln.Accept()
					acc <- x
				}()
				if c, err = net.Dial("tcp", ln.Addr().String()); err != nil {
					b.Fatal(err)
				}
				a = <-acc
				ln.Close()
			}
			buf := make([]byte, 1<<20)
			done := make(chan error, 1)
			go func() {
				_, err := io.CopyN(io.Discard, a, int64(b.N)*int64(len(buf)))
				done <- err
			}()
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			a.Close()
			c.Close()
			if stop != nil {
				b.ReportMetric(stop().Seconds()/(float64(b.N)/1024), "relay-cpu-s/GiB")
			}
		})
	}
}

// pairTLSAt pairs d at the relay process u and runs the inner TLS (a: listening device).
func pairTLSAt(b *testing.B, u URL, d devices, opts *Options) (a, c *transport.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	la := dialAsync(ctx, u, RoleListen, ListenIDs(d.a.ID, []identity.DeviceID{d.b.ID}, time.Now()), opts)
	var sb *Session
	var err error
	for {
		// The listener may not be parked yet; a dialler that comes first waits too.
		sb, err = Dial(ctx, u, RoleDial, []ID{DialID(d.b.ID, d.a.ID, time.Now())}, opts)
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	ra := <-la
	if ra.err != nil {
		b.Fatal(ra.err)
	}
	return innerTLS(b, ra.sess, sb, d)
}

func pairDirect(b *testing.B, d devices) (a, c *transport.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	return innerTLS(b, <-acc, cc, d)
}

func innerTLS(b *testing.B, sa, sb net.Conn, d devices) (a, c *transport.Conn) {
	srv := make(chan error, 1)
	go func() {
		var err error
		a, err = transport.Server(context.Background(), sa, d.config(d.a, d.b))
		srv <- err
	}()
	c, err := transport.Client(context.Background(), sb, d.config(d.b, d.a), d.a.ID)
	if err != nil {
		b.Fatal(err)
	}
	if err := <-srv; err != nil {
		b.Fatal(err)
	}
	return a, c
}
