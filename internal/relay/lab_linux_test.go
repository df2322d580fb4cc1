//go:build linux

package relay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/netlab"
	"github.com/peerfs/peerfs/internal/transport"
)

// The lab tests run a relay process and device processes in network namespaces
// (internal/netlab): the relay on the internet, devices behind NAT routers or an office
// firewall, each in a copy of this test binary.

func init() {
	netlab.Register("relay", labRelay)
	netlab.Register("device", labDevice)
	netlab.Register("abuse", labAbuse)
}

// labRelay serves a relay with the default limits on each port in args[1:] and prints its
// URL with host args[0] (and the first port).
func labRelay(ctx context.Context, args []string) error {
	id, err := identity.Generate()
	if err != nil {
		return err
	}
	s, err := New(Config{Identity: id})
	if err != nil {
		return err
	}
	for _, port := range args[1:] {
		ln, err := net.Listen("tcp", ":"+port)
		if err != nil {
			return err
		}
		go s.Serve(ln)
	}
	fmt.Println(URL{Host: net.JoinHostPort(args[0], args[1]), ID: id.ID})
	<-ctx.Done()
	return s.Close()
}

// labDevice joins a relay and runs the devices' TLS in the session, then one action.
//
//	args: role (listen|dial) URL transport (tls|ws) identity-dir peer-ID action...
//	actions: send N PAUSE-MS  N pseudo-random bytes in 32 KiB writes PAUSE-MS apart, then "sha256 HEX"
//	         sendtext TEXT K  TEXT K times over, then "sha256 HEX"
//	         recv             everything until EOF, "progress BYTES UNIX-NS" every 100 ms, then "sha256 HEX"
//	         raw MARKER       no TLS: MARKER raw through the relayed stream, then waits for EOF
//
// The first line is "observed ADDR" (what the relay saw), or "error: ..." if the join or
// the TLS failed.
func labDevice(ctx context.Context, args []string) error {
	role := RoleDial
	if args[0] == "listen" {
		role = RoleListen
	}
	u, err := ParseURL(args[1])
	if err != nil {
		return err
	}
	opts := &Options{}
	if args[2] == "ws" {
		opts.Transport = TransportWebSocket
	}
	self, err := identity.Load(args[3])
	if err != nil {
		return err
	}
	peer, err := identity.ParseDeviceID(args[4])
	if err != nil {
		return err
	}
	action := args[5:]
	ids := []ID{DialID(self.ID, peer, time.Now())}
	if role == RoleListen {
		ids = ListenIDs(self.ID, []identity.DeviceID{peer}, time.Now())
	}
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sess, err := Dial(jctx, u, role, ids, opts)
	if err != nil {
		fmt.Println("error:", err)
		return nil
	}
	defer sess.Close()
	fmt.Println("observed", sess.Observed)
	if action[0] == "raw" {
		if _, err := io.WriteString(sess, action[1]); err != nil {
			return err
		}
		sess.Conn.(interface{ CloseWrite() error }).CloseWrite()
		_, err := io.Copy(io.Discard, sess)
		return err
	}
	cfg := &transport.Config{Identity: self, Trusted: func() []identity.DeviceID { return []identity.DeviceID{peer} }}
	var tc *transport.Conn
	if role == RoleListen {
		tc, err = transport.Server(ctx, sess, cfg)
	} else {
		tc, err = transport.Client(ctx, sess, cfg, peer)
	}
	if err != nil {
		return fmt.Errorf("devices' TLS through the relay: %w", err)
	}
	defer tc.Close()
	h := sha256.New()
	switch action[0] {
	case "sendtext":
		count, _ := strconv.Atoi(action[2])
		text := []byte(strings.Repeat(action[1], count))
		h.Write(text)
		if _, err := tc.Write(text); err != nil {
			return err
		}
		if err := tc.CloseWrite(); err != nil {
			return err
		}
		fmt.Println("sha256", hex.EncodeToString(h.Sum(nil)))
		_, err := io.Copy(io.Discard, tc)
		return err
	case "send":
		n, _ := strconv.ParseInt(action[1], 10, 64)
		pause, _ := strconv.Atoi(action[2])
		src := rand.NewChaCha8([32]byte{7})
		buf := make([]byte, 32<<10)
		for sent := int64(0); sent < n; {
			chunk := buf[:min(int64(len(buf)), n-sent)]
			src.Read(chunk)
			h.Write(chunk)
			if _, err := tc.Write(chunk); err != nil {
				return fmt.Errorf("after %d bytes: %w", sent, err)
			}
			sent += int64(len(chunk))
			time.Sleep(time.Duration(pause) * time.Millisecond)
		}
		if err := tc.CloseWrite(); err != nil {
			return err
		}
		fmt.Println("sha256", hex.EncodeToString(h.Sum(nil)))
		// Until the receiver closes: everything sent has arrived.
		_, err := io.Copy(io.Discard, tc)
		return err
	case "recv":
		var got atomic.Int64
		done := make(chan struct{})
		go func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					fmt.Println("progress", got.Load(), time.Now().UnixNano())
				case <-done:
					return
				}
			}
		}()
		buf := make([]byte, 64<<10)
		for {
			n, err := tc.Read(buf)
			h.Write(buf[:n])
			got.Add(int64(n))
			if err == io.EOF {
				break
			}
			if err != nil {
				close(done)
				return fmt.Errorf("after %d bytes: %w", got.Load(), err)
			}
		}
		close(done)
		fmt.Println("sha256", hex.EncodeToString(h.Sum(nil)))
		return nil
	}
	return fmt.Errorf("unknown action %q", action[0])
}

// labAbuse opens args[1] connections to the relay at args[0] that say nothing and args[2]
// that send random bytes (every other one after a TLS handshake record's type byte), prints
// "opened N failed M", and holds them until stopped.
func labAbuse(ctx context.Context, args []string) error {
	halfOpen, _ := strconv.Atoi(args[1])
	junk, _ := strconv.Atoi(args[2])
	rng := rand.New(rand.NewPCG(1, 2))
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	failed := 0
	for i := range halfOpen + junk {
		c, err := net.DialTimeout("tcp", args[0], 5*time.Second)
		if err != nil {
			failed++
			continue
		}
		conns = append(conns, c)
		if i < halfOpen {
			continue
		}
		b := make([]byte, 1+rng.IntN(4096))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if i%2 == 0 {
			b[0] = 0x16
		}
		c.Write(b)
	}
	fmt.Println("opened", len(conns), "failed", failed)
	<-ctx.Done()
	return nil
}

// reachLab is a relay on the internet and the identities of devices that trust each other.
type reachLab struct {
	t     *testing.T
	lab   *netlab.Lab
	relay *netlab.Host
	url   string
	dirs  [2]string
	ids   [2]identity.DeviceID
}

func newReachLab(t *testing.T, relayPorts ...string) *reachLab {
	lab := netlab.New(t)
	r := &reachLab{t: t, lab: lab, relay: lab.Public("relay")}
	if len(relayPorts) == 0 {
		relayPorts = []string{"443"}
	}
	r.url = r.relay.Start("relay", append([]string{r.relay.Addr.String()}, relayPorts...)...).Line(10 * time.Second)
	for i := range r.dirs {
		id, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		r.dirs[i] = filepath.Join(t.TempDir(), "id")
		if err := id.Save(r.dirs[i]); err != nil {
			t.Fatal(err)
		}
		r.ids[i] = id.ID
	}
	return r
}

// device starts device i (0 listens, 1 dials) on h and returns it with the address the
// relay saw it at.
func (r *reachLab) device(h *netlab.Host, i int, url, transport string, action ...string) (*netlab.Proc, netip.AddrPort) {
	r.t.Helper()
	role := []string{"listen", "dial"}[i]
	p := h.Start("device", append([]string{role, url, transport, r.dirs[i], r.ids[1-i].String()}, action...)...)
	line := p.Line(40 * time.Second)
	obs, ok := strings.CutPrefix(line, "observed ")
	if !ok {
		r.t.Fatalf("device %d in %s: %s", i, h.Name, line)
	}
	ap, err := netip.ParseAddrPort(obs)
	if err != nil {
		r.t.Fatalf("device %d: %q", i, line)
	}
	return p, ap
}

// pair runs a session from a listening device on ha to a dialling one on hb that sends n
// bytes, and checks they arrive intact.
func (r *reachLab) pair(ha, hb *netlab.Host, transportA, transportB string, n int64) {
	r.t.Helper()
	type started struct {
		p   *netlab.Proc
		obs netip.AddrPort
	}
	ch := make(chan started, 1)
	go func() {
		p, obs := r.device(ha, 0, r.url, transportA, "recv")
		ch <- started{p, obs}
	}()
	sender, obsB := r.device(hb, 1, r.url, transportB, "send", strconv.FormatInt(n, 10), "0")
	recv := <-ch
	if obsB.Addr() != hb.Public || recv.obs.Addr() != ha.Public {
		r.t.Errorf("the relay saw the devices at %s and %s, want their public addresses %s and %s", recv.obs, obsB, ha.Public, hb.Public)
	}
	want := lastLine(r.t, sender, "sha256 ")
	got := lastLine(r.t, recv.p, "sha256 ")
	if got != want {
		r.t.Errorf("%d bytes through the relay: received sha256 %s, sent %s", n, got, want)
	}
}

// lastLine reads p's lines until one starts with prefix and returns the rest.
func lastLine(t *testing.T, p *netlab.Proc, prefix string) string {
	t.Helper()
	for {
		line := p.Line(60 * time.Second)
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			return rest
		}
	}
}

// TestLabRelayAcrossNATs: two hosts behind two routers that let nothing in (two home NATs;
// a home NAT and a symmetric one) meet at a relay on the internet and move 64 MiB end to end
// through their own TLS; each learns its router's public address from the relay.
func TestLabRelayAcrossNATs(t *testing.T) {
	for _, tc := range []struct {
		name string
		natB netlab.NAT
	}{{"two home NATs", netlab.HomeNAT}, {"home and symmetric NAT", netlab.SymmetricNAT}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReachLab(t)
			ha := r.lab.Router("homeA", netlab.RouterOptions{NAT: netlab.HomeNAT}).AddHost("a")
			hb := r.lab.Router("routerB", netlab.RouterOptions{NAT: tc.natB}).AddHost("b")
			r.pair(ha, hb, "tls", "tls", 64<<20)
		})
	}
}

// TestLabOnlyHTTPS: a device behind an office firewall that lets out only TCP to port 443
// reaches the relay on 443 by raw TLS and by WebSocket; the relay's other port is blocked
// (the firewall works).
func TestLabOnlyHTTPS(t *testing.T) {
	r := newReachLab(t, "443", "8443")
	ha := r.lab.Router("home", netlab.RouterOptions{NAT: netlab.HomeNAT}).AddHost("a")
	hc := r.lab.Router("office", netlab.RouterOptions{NAT: netlab.HomeNAT, OnlyHTTPS: true}).AddHost("c")
	t.Run("raw TLS on 443", func(t *testing.T) { r.pair(ha, hc, "tls", "tls", 8<<20) })
	t.Run("WebSocket on 443", func(t *testing.T) { r.pair(ha, hc, "tls", "ws", 8<<20) })
	t.Run("port 8443 blocked", func(t *testing.T) {
		other := strings.Replace(r.url, ":443/", ":8443/", 1)
		p := hc.Start("device", "dial", other, "tls", r.dirs[1], r.ids[0].String(), "recv")
		if line := p.Line(60 * time.Second); !strings.HasPrefix(line, "error: ") {
			t.Fatalf("a device behind the office firewall reached the relay on port 8443: %s", line)
		} else {
			t.Log(line)
		}
	})
}

// sendMarkerCaptured sends marker 1,000 times from hb to ha inside the devices' TLS through
// the relay while capturing the relay's interface; it fails if the marker shows there, and
// returns the bytes and packets captured.
func sendMarkerCaptured(t *testing.T, r *reachLab, ha, hb *netlab.Host, marker string) (total, packets int) {
	t.Helper()
	capture := r.relay.Capture("eth0", "tcp")
	recv := make(chan *netlab.Proc, 1)
	go func() {
		p, _ := r.device(ha, 0, r.url, "tls", "recv")
		recv <- p
	}()
	sender, _ := r.device(hb, 1, r.url, "tls", "sendtext", marker, "1000")
	want := lastLine(t, sender, "sha256 ")
	if got := lastLine(t, <-recv, "sha256 "); got != want {
		t.Fatalf("the marker text arrived altered: sha256 %s, sent %s", got, want)
	}
	pkts, err := capture.Packets()
	if err != nil {
		t.Fatal(err)
	}
	for _, pk := range pkts {
		total += len(pk)
		if bytes.Contains(pk, []byte(marker)) {
			t.Fatal("the marker sent inside the devices' TLS crossed the relay's interface in clear")
		}
	}
	return total, len(pkts)
}

// TestLabRelaySeesNoPlaintext: a marker in data sent through the devices' TLS never appears
// in the traffic on the relay's interface; the same marker sent raw through a relayed
// stream does (the capture sees the stream).
func TestLabRelaySeesNoPlaintext(t *testing.T) {
	r := newReachLab(t)
	ha := r.lab.Router("homeA", netlab.RouterOptions{NAT: netlab.HomeNAT}).AddHost("a")
	hb := r.lab.Router("homeB", netlab.RouterOptions{NAT: netlab.HomeNAT}).AddHost("b")
	marker := "MARKER-5be1d2-the-relay-must-never-read-this"

	// A capture proves an absence only if it holds the whole stream; on a loaded machine
	// tcpdump has been seen to miss part of it, so a short one is taken again.
	for attempt := 1; ; attempt++ {
		total, pkts := sendMarkerCaptured(t, r, ha, hb, marker)
		if total >= 1000*len(marker) {
			break
		}
		if attempt == 3 {
			t.Fatalf("captured %d bytes in %d packets, fewer than the %d sent, %d times: the capture misses the stream", total, pkts, 1000*len(marker), attempt)
		}
		t.Logf("captured %d bytes in %d packets, fewer than the %d sent: capturing again", total, pkts, 1000*len(marker))
	}

	// Control: the marker raw through a relayed stream is seen.
	rawCapture := r.relay.Capture("eth0", "tcp")
	rawRecv := make(chan *netlab.Proc, 1)
	go func() {
		p, _ := r.device(ha, 0, r.url, "tls", "raw", "x")
		rawRecv <- p
	}()
	rawSender, _ := r.device(hb, 1, r.url, "tls", "raw", marker)
	for _, p := range []*netlab.Proc{rawSender, <-rawRecv} {
		if err := p.Wait(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if found, err := rawCapture.Contains([]byte(marker)); err != nil || !found {
		t.Fatalf("the marker sent raw through the relay is not in the capture (%v): the capture does not see the stream", err)
	}
}

// TestLabAbuse: while a session between two devices behind home routers moves data, a host
// on the internet opens 1,000 connections that say nothing and 200 that send random bytes;
// the session keeps moving data and ends intact, and new devices still meet.
func TestLabAbuse(t *testing.T) {
	r := newReachLab(t)
	ha := r.lab.Router("homeA", netlab.RouterOptions{NAT: netlab.HomeNAT}).AddHost("a")
	hb := r.lab.Router("homeB", netlab.RouterOptions{NAT: netlab.HomeNAT}).AddHost("b")
	attacker := r.lab.Public("attacker")

	recvCh := make(chan *netlab.Proc, 1)
	go func() {
		p, _ := r.device(ha, 0, r.url, "tls", "recv")
		recvCh <- p
	}()
	// 48 MiB in 32 KiB writes 5 ms apart: about 8 s of traffic.
	sender, _ := r.device(hb, 1, r.url, "tls", "send", strconv.Itoa(48<<20), "5")
	recv := <-recvCh

	attackStart := time.Now()
	abuse := attacker.Start("abuse", netip.AddrPortFrom(r.relay.Addr, 443).String(), "1000", "200")
	t.Logf("attacker: %s", abuse.Line(60*time.Second))
	attackEnd := time.Now()
	t.Logf("the attack took %v", attackEnd.Sub(attackStart).Round(time.Millisecond))

	// The receiver's progress, stamped: bytes must keep arriving after the attack's
	// connections are all open (and held).
	type sample struct {
		at time.Time
		n  int64
	}
	var afterAttack []sample
	var sum string
	for sum == "" {
		line := recv.Line(60 * time.Second)
		if rest, ok := strings.CutPrefix(line, "sha256 "); ok {
			sum = rest
			break
		}
		var n, ns int64
		if _, err := fmt.Sscanf(line, "progress %d %d", &n, &ns); err != nil {
			t.Fatalf("receiver: %q", line)
		}
		if at := time.Unix(0, ns); at.After(attackEnd) {
			afterAttack = append(afterAttack, sample{at, n})
		}
	}
	if len(afterAttack) < 2 || afterAttack[len(afterAttack)-1].n <= afterAttack[0].n {
		t.Errorf("no data moved after the attack began (%d samples after it): the session stalled, or ended before the attack was in place; lengthen the stream", len(afterAttack))
	} else {
		first, last := afterAttack[0], afterAttack[len(afterAttack)-1]
		t.Logf("after the attack: %d bytes in %v", last.n-first.n, last.at.Sub(first.at).Round(time.Millisecond))
	}
	if want := lastLine(t, sender, "sha256 "); sum != want {
		t.Errorf("the session's 48 MiB arrived altered under attack: sha256 %s, sent %s", sum, want)
	}
	// Still serving, with the attack's connections still open: a new pair meets and talks.
	r.pair(ha, hb, "tls", "tls", 1<<20)
	abuse.Stop()
}
