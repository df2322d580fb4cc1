package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/netlab"
	"github.com/peerfs/peerfs/internal/pair"
	"github.com/peerfs/peerfs/internal/transport"
)

func TestMain(m *testing.M) {
	// "peerfs" runs the command line inside a lab namespace (a daemon, for the lab tests).
	netlab.Register("peerfs", func(ctx context.Context, args []string) error {
		if exit := execute(ctx, args, os.Stdout, os.Stderr, false); exit != 0 {
			return fmt.Errorf("exit status %d", exit)
		}
		return nil
	})
	netlab.Register("pair-mitm", pairMITM)
	netlab.Main()
	os.Exit(m.Run())
}

// TestPairLab: two hosts on one bridge, each with a daemon, nothing configured but the
// pairing: "peerfs pair" on one, "peerfs pair CODE" on the other, then each lists and pulls
// the other's share with no address given. Once over IPv4, once with IPv6 link-local
// addresses only.
func TestPairLab(t *testing.T) {
	if testing.Short() {
		t.Skip("network namespaces: not in -short")
	}
	for _, family := range []string{"ipv4", "ipv6-link-local"} {
		t.Run(family, func(t *testing.T) {
			lab := netlab.New(t)
			r := lab.Router("r", netlab.RouterOptions{NAT: netlab.HomeNAT})
			hosts := []*netlab.Host{r.AddHost("a"), r.AddHost("b")}
			if family != "ipv4" {
				for _, h := range hosts {
					linkLocalOnly(t, h)
				}
			}
			a, b := initHomes(t)
			var addrs []string
			for i, home := range []string{a, b} {
				hosts[i].Start("peerfs", "--home", home, "daemon", "--listen", ":7462")
				addrs = append(addrs, waitDaemon(t, home))
			}
			t.Logf("daemons listen at %v", addrs)

			capture := r.Capture("lan0")
			s := startPairShow(t, a)
			out := mustRun(t, b, "pair", s.code)
			if !strings.HasPrefix(out, "paired with alpha (") {
				t.Errorf("joiner printed %q", out)
			}
			if exit, last := s.wait(t); exit != 0 || !strings.Contains(last, `"name":"beta-laptop"`) {
				t.Fatalf("shower: exit %d, last line %q", exit, last)
			}
			pa, pb := peerList(t, a), peerList(t, b)
			t.Logf("alpha dials beta at %s, beta dials alpha at %s", pa[0].Addr, pb[0].Addr)
			if family != "ipv4" && (!strings.Contains(pa[0].Addr, "fe80::") || !strings.Contains(pb[0].Addr, "fe80::")) {
				t.Errorf("addresses %q and %q: want IPv6 link-local", pa[0].Addr, pb[0].Addr)
			}

			dirA, dirB := t.TempDir(), t.TempDir()
			os.WriteFile(filepath.Join(dirA, "hello.txt"), []byte("from alpha"), 0o644)
			os.WriteFile(filepath.Join(dirB, "hello.txt"), []byte("from beta"), 0o644)
			mustRun(t, a, "share", "add", "docs", dirA, "--peer", "beta-laptop")
			mustRun(t, b, "share", "add", "docs", dirB, "--peer", "alpha")
			for _, c := range []struct{ home, remote, want string }{{a, "beta-laptop", "from beta"}, {b, "alpha", "from alpha"}} {
				if out := mustRun(t, c.home, "ls", c.remote+":docs"); !strings.Contains(out, "hello.txt") {
					t.Errorf("ls %s:docs = %q", c.remote, out)
				}
				dest := filepath.Join(t.TempDir(), "got.txt")
				exit, _, errOut := run(t, c.home, "pull", c.remote+":docs/hello.txt", dest)
				if exit == ExitUnreachable && strings.Contains(errOut, "replaced by a newer link") {
					// Both daemons dial each other as soon as they are paired; when both
					// links come up, one replaces the other and a call already on it ends
					// with this error, which says to run the command again.
					t.Logf("pull: %s; running it again as the error says", strings.TrimSpace(errOut))
					exit, _, errOut = run(t, c.home, "pull", c.remote+":docs/hello.txt", dest)
				}
				if exit != 0 {
					t.Fatalf("pull from %s: exit %d: %s", c.remote, exit, errOut)
				}
				if got, err := os.ReadFile(dest); err != nil || string(got) != c.want {
					t.Errorf("pulled %q, %v; want %q", got, err, c.want)
				}
			}

			// Nothing that names a device, a user or a share, and not the code,
			// crossed the bridge in clear.
			packets, err := netlab.ParsePcap(capture.Stop())
			if err != nil || len(packets) == 0 {
				t.Fatalf("capture: %d packets, %v", len(packets), err)
			}
			secrets := map[string][]byte{"alpha's name": []byte("alpha"), "beta's name": []byte("Beta Laptop"), "beta's peer name": []byte("beta-laptop"),
				"share name": []byte("docs"), "file name": []byte("hello.txt")}
			// The whole code, and its words as the PAKE's password has them; single words
			// are too short (three letters) not to turn up in ciphertext by chance.
			secrets["the code"] = []byte(s.code)
			secrets["the code's words"] = []byte(strings.SplitN(s.code, "-", 2)[1])
			// A host name of two or three letters (a VM's "vm") turns up in 80 KB of
			// ciphertext by chance about once in two runs.
			if host, err := os.Hostname(); err == nil && len(host) >= 4 {
				secrets["host name"] = []byte(host)
			}
			secrets["beta's device ID"], secrets["beta's raw device ID"] = []byte(pa[0].DeviceID.String()), pa[0].DeviceID[:]
			secrets["alpha's device ID"], secrets["alpha's raw device ID"] = []byte(pb[0].DeviceID.String()), pb[0].DeviceID[:]
			for what, b := range secrets {
				for _, pkt := range packets {
					if bytes.Contains(pkt, b) {
						t.Errorf("%s (%q) crossed the bridge in clear", what, b)
						break
					}
				}
			}
			t.Logf("%d packets captured on the bridge", len(packets))
		})
	}
}

// pairMITM is a device in the middle: it listens on port args[0], takes one connection,
// answers its TLS with a certificate of its own whatever the server name, opens its own TLS
// to args[1] with the pairing tag of code args[2] (the nameplate is public), and relays the
// bytes of the two TLS sessions both ways. It prints "ready" once listening.
func pairMITM(ctx context.Context, args []string) error {
	code, err := pair.Parse(args[2])
	if err != nil {
		return err
	}
	self, err := identity.Generate()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", ":"+args[0])
	if err != nil {
		return err
	}
	defer ln.Close()
	context.AfterFunc(ctx, func() { ln.Close() })
	fmt.Println("ready")
	raw, err := ln.Accept()
	if err != nil {
		return err
	}
	front, err := transport.Server(ctx, raw, &transport.Config{Identity: self, Unproven: func(*tls.ClientHelloInfo) bool { return true }})
	if err != nil {
		return err
	}
	defer front.Close()
	back, err := transport.DialProvisional(ctx, args[1], &transport.Config{Identity: self}, code.Tag())
	if err != nil {
		return err
	}
	defer back.Close()
	go io.Copy(back, front)
	io.Copy(front, back)
	fmt.Println("relayed")
	return nil
}

// TestPairLabManInTheMiddle: a third host on the bridge takes the joiner's connection and
// relays the pairing between two TLS sessions of its own. Both devices fail with "wrong
// code", although both used the right one, and neither trusts anybody.
func TestPairLabManInTheMiddle(t *testing.T) {
	if testing.Short() {
		t.Skip("network namespaces: not in -short")
	}
	lab := netlab.New(t)
	r := lab.Router("r", netlab.RouterOptions{NAT: netlab.HomeNAT})
	ha, hb, hm := r.AddHost("a"), r.AddHost("b"), r.AddHost("m")
	a, b := initHomes(t)
	ha.Start("peerfs", "--home", a, "daemon", "--listen", ":7462")
	hb.Start("peerfs", "--home", b, "daemon", "--listen", ":7462")
	waitDaemon(t, a)
	waitDaemon(t, b)

	s := startPairShow(t, a)
	m := hm.Start("pair-mitm", "7000", net.JoinHostPort(ha.Addr.String(), "7462"), s.code)
	if line := m.Line(10 * time.Second); line != "ready" {
		t.Fatalf("middle: %q", line)
	}
	exit, _, errOut := run(t, b, "pair", s.code, "--addr", net.JoinHostPort(hm.Addr.String(), "7000"))
	if exit != ExitWrongCode {
		t.Errorf("joiner through the middle: exit %d (%s), want %d", exit, errOut, ExitWrongCode)
	}
	if exit, _ := s.wait(t); exit != ExitWrongCode {
		t.Errorf("shower through the middle: exit %d, want %d", exit, ExitWrongCode)
	}
	if line := m.Line(10 * time.Second); line != "relayed" {
		t.Errorf("middle: %q, want it to have relayed both ways", line)
	}
	if pa, pb := peerList(t, a), peerList(t, b); len(pa)+len(pb) != 0 {
		t.Errorf("trusted after a relayed pairing: %+v %+v", pa, pb)
	}
}

// linkLocalOnly turns IPv6 on in h (the lab turns it off) and takes its IPv4 address away:
// h then has only its IPv6 link-local address on the bridge.
func linkLocalOnly(t *testing.T, h *netlab.Host) {
	t.Helper()
	h.Run("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0", "net.ipv6.conf.default.disable_ipv6=0", "net.ipv6.conf."+h.Iface+".disable_ipv6=0")
	h.Run("ip", "-4", "addr", "flush", "dev", h.Iface)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out := h.Run("ip", "-6", "addr", "show", "dev", h.Iface, "scope", "link")
		if strings.Contains(out, "fe80::") && !strings.Contains(out, "tentative") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no IPv6 link-local address on %s in %s: %s", h.Iface, h.Name, out)
		}
	}
}

// waitDaemon waits for the daemon of home to answer and returns its peer address.
func waitDaemon(t *testing.T, home string) string {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if exit, out, _ := run(t, home, "status", "--json"); exit == 0 {
			var st struct {
				Listen string `json:"listen"`
			}
			decodeOne(t, out, &st)
			return st.Listen
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon of %s did not start", home)
		}
	}
}
