package node_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/peertest"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/transport"
)

// TestMain lets this test binary double as the connection flood of the accept tests: with
// PEERFS_TEST_FLOOD set it floods instead of running tests (see runFlood).
func TestMain(m *testing.M) {
	if spec := os.Getenv("PEERFS_TEST_FLOOD"); spec != "" {
		if err := runFlood(spec); err != nil {
			fmt.Fprintln(os.Stderr, "flood:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	for _, f := range afterTests {
		f()
	}
	os.Exit(code)
}

// afterTests run once all tests are done (removing what several tests shared).
var afterTests []func()

// runFlood is the flooding process. spec is "MODE,FROM,TO,COUNT". It waits for a line on
// stdin, then: in mode idle it opens COUNT connections from the address FROM to TO, sends
// nothing, writes "ready" and holds them until stdin closes; in mode junk it opens COUNT
// connections one after another, each sending bytes that are not TLS, then writes "ready".
// FROM may be "ADDR+N": the connections then come from ADDR and the N-1 addresses after it
// in turn.
func runFlood(spec string) error {
	f := strings.Split(spec, ",")
	if len(f) != 4 {
		return fmt.Errorf("bad spec %q", spec)
	}
	count, err := strconv.Atoi(f[3])
	if err != nil {
		return err
	}
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		return err
	}
	from, sources := f[1], 1
	if base, n, ok := strings.Cut(from, "+"); ok {
		from = base
		if sources, err = strconv.Atoi(n); err != nil {
			return err
		}
	}
	first, err := netip.ParseAddr(from)
	if err != nil {
		return err
	}
	var held []net.Conn
	for i := range count {
		src := first
		for range i % sources {
			src = src.Next()
		}
		d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
		c, err := d.Dial("tcp", f[2])
		if err != nil {
			continue // a full backlog drops SYNs; the flood needs no particular count
		}
		if f[0] == "junk" {
			c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
			io.Copy(io.Discard, c)
			c.Close()
			continue
		}
		held = append(held, c)
	}
	fmt.Println("ready", len(held))
	io.Copy(io.Discard, in) // until the test closes stdin
	for _, c := range held {
		c.Close()
	}
	return nil
}

// flood is a running flooding process.
type flood struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startFlood(t *testing.T, mode, from, to string, count int) *flood {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PEERFS_TEST_FLOOD=%s,%s,%s,%d", mode, from, to, count))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &flood{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(f.stop)
	return f
}

// run starts the flood and waits until its connections are open (or sent).
func (f *flood) run(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(f.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	line, err := f.out.ReadString('\n')
	if err != nil {
		t.Fatalf("flood: %v", err)
	}
	t.Logf("flood: %s", strings.TrimSpace(line))
}

// stop closes the flood's connections and waits for it to exit. Safe to repeat.
func (f *flood) stop() {
	if f.stdin != nil {
		f.stdin.Close()
		f.stdin = nil
		f.cmd.Wait()
	}
}

// TestIdleFloodFromManySourcesGivesWay: idle connections from many addresses, enough to
// fill every handshake slot, give way to a trusted peer's handshake instead of holding it
// off until they time out.
func TestIdleFloodFromManySourcesGivesWay(t *testing.T) {
	a := peertest.Start(t, "alpha", "")
	b := peertest.Start(t, "beta", "")
	a.Trust(b, false)

	fl := startFlood(t, "idle", "127.0.1.1+25", a.Addr, 200) // 8 from each of 25 addresses
	fl.run(t)
	start := time.Now()
	b.Trust(a, true)
	waitConnected(t, b, "alpha")
	// The idle handshakes time out after 10 s (transport.DefaultHandshakeTimeout); beta
	// must not wait for that.
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("beta connected after %v: the idle flood held every handshake slot", d.Round(time.Millisecond))
	}
}

// TestRefusedHandshakesLoggedAtBoundedRate: a stranger sending hundreds of non-TLS
// connections must not write a log line for each.
func TestRefusedHandshakesLoggedAtBoundedRate(t *testing.T) {
	a, b := peertest.Pair(t)
	waitConnected(t, b, "alpha")
	fl := startFlood(t, "junk", "127.0.0.3", a.Addr, 200)
	fl.run(t)
	time.Sleep(200 * time.Millisecond) // the last handshakes end
	if got := a.Logged("refused incoming"); len(got) > 2 {
		t.Fatalf("%d log lines for 200 refused connections, want a first line and at most one summary; first: %s", len(got), got[0])
	}
	a.Stop() // writes the pending summary
	got := a.Logged("refused incoming connections")
	if len(got) != 1 || !strings.Contains(got[0], "count=") {
		t.Fatalf("summary lines at stop: %q", got)
	}
}

// TestLinksPerPeerCapped: a trusted peer opening dozens of links gets at most a handful;
// the others are closed with one log line, not one each, and its usual link keeps working.
func TestLinksPerPeerCapped(t *testing.T) {
	a, b := peertest.Pair(t)
	waitConnected(t, b, "alpha")
	cfg := &transport.Config{Identity: b.ID, Trusted: func() []identity.DeviceID { return []identity.DeviceID{a.ID.ID} }}
	ctx := context.Background()
	var opened []*rpc.Session
	defer func() {
		for _, s := range opened {
			s.Close(errors.New("test over"))
		}
	}()
	for range 40 {
		conn, err := transport.Dial(ctx, a.Addr, cfg, a.ID.ID)
		if err != nil {
			t.Fatal(err)
		}
		s, err := rpc.New(conn, rpc.Options{Name: "beta"})
		if err != nil {
			continue // refused
		}
		opened = append(opened, s)
	}
	// beta's daemon link is one of the 8.
	if len(opened) > 7 {
		t.Fatalf("beta opened %d more links to alpha, want at most 7 beside its own", len(opened))
	}
	if got := a.Logged("refused incoming"); len(got) > 2 {
		t.Fatalf("%d log lines for %d refused links", len(got), 40-len(opened))
	}
	if _, err := b.N.List(ctx, api.ListParams{Peer: "alpha"}); err != nil {
		t.Fatal(err)
	}
	// Closed links give their place back.
	for _, s := range opened {
		s.Close(errors.New("done"))
	}
	opened = nil
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := transport.Dial(ctx, a.Addr, cfg, a.ID.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s, err := rpc.New(conn, rpc.Options{Name: "beta"}); err == nil {
			opened = append(opened, s)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no link accepted after the others closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStrangerLearnsNothing: a TLS client that is not a trusted peer dialling this device
// gets no certificate (so neither the device ID nor the certificate's creation time) from a
// running node, whose trusted peer still connects.
func TestStrangerLearnsNothing(t *testing.T) {
	a, b := peertest.Pair(t)
	stranger, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	var certs atomic.Int32
	conn, err := tls.Dial("tcp", a.Addr, &tls.Config{
		MinVersion:         tls.VersionTLS13,
		Certificates:       []tls.Certificate{stranger.Cert},
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			certs.Add(int32(len(raw)))
			return nil
		},
	})
	if err == nil {
		conn.Close()
		t.Fatal("a stranger completed a TLS handshake")
	}
	if n := certs.Load(); n > 0 {
		t.Fatalf("a stranger received %d certificates", n)
	}
	waitConnected(t, b, "alpha")
}
