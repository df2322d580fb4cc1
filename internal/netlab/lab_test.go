//go:build linux

package netlab_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/netlab"
)

func TestMain(m *testing.M) {
	netlab.Register("whoami", serveWhoami)
	netlab.Register("ask", ask)
	netlab.Main()
	os.Exit(m.Run())
}

// serveWhoami listens on port args[0] and tells each connection the address it came from,
// then echoes a line back. It prints "ready" once listening.
func serveWhoami(ctx context.Context, args []string) error {
	ln, err := net.Listen("tcp", ":"+args[0])
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, func() { ln.Close() })
	fmt.Println("ready")
	for {
		c, err := ln.Accept()
		if err != nil {
			return nil
		}
		go func() {
			defer c.Close()
			fmt.Fprintln(c, c.RemoteAddr())
			line, _ := bufio.NewReader(c).ReadString('\n')
			fmt.Fprint(c, line)
		}()
	}
}

// ask connects to args[0] from local port args[1] (0: any) and sends args[2]; it prints the
// address the server saw, or "error: ...".
func ask(ctx context.Context, args []string) error {
	port, _ := strconv.Atoi(args[1])
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{Port: port}}
	c, err := d.DialContext(ctx, "tcp", args[0])
	if err != nil {
		fmt.Println("error:", err)
		return nil
	}
	defer c.Close()
	fmt.Fprintln(c, args[2])
	r := bufio.NewReader(c)
	seen, err := r.ReadString('\n')
	if err != nil {
		fmt.Println("error:", err)
		return nil
	}
	if _, err := r.ReadString('\n'); err != nil {
		fmt.Println("error: no echo:", err)
		return nil
	}
	fmt.Print(seen)
	return nil
}

func whoami(t *testing.T, h *netlab.Host, port string) {
	t.Helper()
	p := h.Start("whoami", port)
	if line := p.Line(10 * time.Second); line != "ready" {
		t.Fatalf("whoami server: %q", line)
	}
}

// askFrom runs ask in h and returns what the server saw, or an error.
func askFrom(t *testing.T, h *netlab.Host, server string, localPort int, msg string) (netip.AddrPort, error) {
	t.Helper()
	line := h.Start("ask", server, strconv.Itoa(localPort), msg).Line(10 * time.Second)
	if rest, ok := strings.CutPrefix(line, "error: "); ok {
		return netip.AddrPort{}, errors.New(rest)
	}
	ap, err := netip.ParseAddrPort(line)
	if err != nil {
		t.Fatalf("ask: %q", line)
	}
	return ap, nil
}

func TestNATs(t *testing.T) {
	lab := netlab.New(t)
	server := lab.Public("server")
	home := lab.Router("home", netlab.RouterOptions{NAT: netlab.HomeNAT})
	sym := lab.Router("sym", netlab.RouterOptions{NAT: netlab.SymmetricNAT})
	a := home.AddHost("a")
	b := sym.AddHost("b")
	whoami(t, server, "7000")
	whoami(t, a, "7000")
	srv := netip.AddrPortFrom(server.Addr, 7000).String()

	if !a.Addr.IsPrivate() || a.Public != home.Addr || !server.Addr.Is4() {
		t.Fatalf("addresses: a %s (public %s), home %s, server %s", a.Addr, a.Public, home.Addr, server.Addr)
	}

	// A home NAT keeps the host's port, the same for every destination.
	seen, err := askFrom(t, a, srv, 41000, "x")
	if err != nil {
		t.Fatalf("behind the home NAT: %v", err)
	}
	if seen != netip.AddrPortFrom(home.Addr, 41000) {
		t.Errorf("server saw the home NAT's host at %s, want %s:41000 (port kept)", seen, home.Addr)
	}

	// A symmetric NAT picks a random port per connection. Each try dials from a port of its
	// own: a second dial from one port to the same server could meet the first connection's
	// 4-tuple still in TIME_WAIT ("address already in use").
	moved := 0
	for i := range 3 {
		port := 41000 + i
		seen, err := askFrom(t, b, srv, port, "x")
		if err != nil {
			t.Fatalf("behind the symmetric NAT: %v", err)
		}
		if seen.Addr() != sym.Addr {
			t.Errorf("server saw the symmetric NAT's host at %s, want address %s", seen, sym.Addr)
		}
		if seen.Port() != uint16(port) {
			moved++
		}
	}
	if moved == 0 {
		t.Error("the symmetric NAT kept the host's port three times out of three")
	}

	// Nothing from outside gets in: not to the router itself, not forwarded.
	if _, err := askFrom(t, server, netip.AddrPortFrom(home.Addr, 7000).String(), 0, "x"); err == nil {
		t.Error("a connection from the internet reached the home router's port 7000")
	}
	if _, err := askFrom(t, b, netip.AddrPortFrom(a.Addr, 7000).String(), 0, "x"); err == nil {
		t.Error("a host behind another router reached a LAN address behind the home router")
	}
}

func TestOnlyHTTPS(t *testing.T) {
	lab := netlab.New(t)
	server := lab.Public("server")
	office := lab.Router("office", netlab.RouterOptions{NAT: netlab.HomeNAT, OnlyHTTPS: true})
	c := office.AddHost("c")
	whoami(t, server, "443")
	whoami(t, server, "80")
	if _, err := askFrom(t, c, netip.AddrPortFrom(server.Addr, 443).String(), 0, "x"); err != nil {
		t.Errorf("port 443 out of the office: %v", err)
	}
	if _, err := askFrom(t, c, netip.AddrPortFrom(server.Addr, 80).String(), 0, "x"); err == nil {
		t.Error("port 80 got out of an office that lets out only 443")
	}
}

func TestCutAndCapture(t *testing.T) {
	lab := netlab.New(t)
	server := lab.Public("server")
	home := lab.Router("home", netlab.RouterOptions{NAT: netlab.HomeNAT})
	a := home.AddHost("a")
	whoami(t, server, "7000")
	srv := netip.AddrPortFrom(server.Addr, 7000).String()

	capture := server.Capture("eth0", "tcp")
	if _, err := askFrom(t, a, srv, 0, "marker-7d1c0e"); err != nil {
		t.Fatal(err)
	}
	found, err := capture.Contains([]byte("marker-7d1c0e"))
	if err != nil || !found {
		t.Errorf("the capture on the server's interface lacks the marker sent in clear (found %v, %v)", found, err)
	}

	restore := lab.Cut(a.Public, server.Addr)
	if _, err := askFrom(t, a, srv, 0, "x"); err == nil {
		t.Error("a connection got through a cut path")
	}
	restore()
	if _, err := askFrom(t, a, srv, 0, "x"); err != nil {
		t.Errorf("after restoring the path: %v", err)
	}
}

func TestCleanup(t *testing.T) {
	var names []string
	t.Run("lab", func(t *testing.T) {
		lab := netlab.New(t)
		r := lab.Router("r", netlab.RouterOptions{NAT: netlab.HomeNAT})
		names = []string{lab.Internet().NS, lab.Public("p").NS, r.NS, r.AddHost("h").NS}
		whoami(t, r.AddHost("h2"), "7000")
	})
	if len(names) == 0 {
		t.Skip("the lab was skipped")
	}
	for _, ns := range names {
		if _, err := os.Stat("/run/netns/" + ns); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s still exists after its test (%v)", ns, err)
		}
	}
}
