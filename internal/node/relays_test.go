package node_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/node"
	"github.com/peerfs/peerfs/internal/peertest"
	"github.com/peerfs/peerfs/internal/relay"
	"github.com/peerfs/peerfs/internal/transport"
)

// startRelay runs a relay on a loopback port for the test.
func startRelay(t *testing.T) (*relay.Server, relay.URL) {
	t.Helper()
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	s, err := relay.New(relay.Config{Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	return s, relay.URL{Host: ln.Addr().String(), ID: s.ID()}
}

// addRelay configures u on n.
func addRelay(n *peertest.Node, u relay.URL) {
	n.Update(func(f *config.File) error {
		f.Relays = append(f.Relays, u.String())
		return nil
	})
}

// waitPath waits until n's link to peer runs on path and returns the peer's status.
func waitPath(t *testing.T, n *peertest.Node, peer, path string, within time.Duration) api.PeerStatus {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := n.N.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range st.Peers {
			if p.Name == peer && p.Connected && p.Path == path {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never saw %s on path %s within %v: %+v", n.Name, peer, path, within, st.Peers)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// relayPair starts two nodes that trust each other with no address and share relay u. With
// keepRelayed they never punch a direct path over the relayed link (on loopback every punch
// would succeed at once).
func relayPair(t *testing.T, u relay.URL, keepRelayed bool) (a, b *peertest.Node) {
	opts := func(o *node.Options) { o.KeepRelayed = keepRelayed }
	a = peertest.StartWith(t, "alpha", "", opts)
	b = peertest.StartWith(t, "beta", "", opts)
	addRelay(a, u)
	addRelay(b, u)
	a.Trust(b, false)
	b.Trust(a, false)
	return a, b
}

// TestPeersMeetThroughRelay: two devices with no address for each other link through the
// relay they both use, status says so on both sides, and a pull works over it.
func TestPeersMeetThroughRelay(t *testing.T) {
	srv, u := startRelay(t)
	a, b := relayPair(t, u, true)
	dir := t.TempDir()
	peertest.WriteRandomFile(t, filepath.Join(dir, "f.bin"), 3<<20, 7)
	a.Share("docs", dir, true, "beta")

	for _, c := range []struct {
		n    *peertest.Node
		peer string
	}{{a, "beta"}, {b, "alpha"}} {
		p := waitPath(t, c.n, c.peer, api.PathRelayed, 15*time.Second)
		if p.Via != u.Redacted() || p.RemoteAddr != u.Host {
			t.Errorf("%s sees %s via %q at %q; want via %q at %q", c.n.Name, c.peer, p.Via, p.RemoteAddr, u.Redacted(), u.Host)
		}
		if p.KeyExch != "X25519MLKEM768" {
			t.Errorf("%s: key exchange %q inside the relayed stream", c.n.Name, p.KeyExch)
		}
	}
	// Right after a session the listener joins again.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, _ := a.N.Status(context.Background())
		if len(st.Relays) == 1 && st.Relays[0].Connected && st.Relays[0].URL == u.Redacted() && st.Relays[0].Transport == "tls" &&
			st.Relays[0].Observed != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("relay status: %+v", st.Relays)
		}
	}

	dest := filepath.Join(t.TempDir(), "f.bin")
	if _, err := b.N.Pull(context.Background(), api.PullParams{Peer: "alpha", Share: "docs", Path: "f.bin", Dest: dest}, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(peertest.FileHash(t, dest), peertest.FileHash(t, filepath.Join(dir, "f.bin"))) {
		t.Fatal("pulled file differs")
	}
	if got := srv.Stats().Bytes; got < 3<<20 {
		t.Errorf("the relay spliced %d bytes, less than the file", got)
	}
}

// TestRelayedLinkUpgradesToDirect: once a peer learns an address of the other, a direct
// link replaces the relayed one on both sides, and the relay carries nothing more.
func TestRelayedLinkUpgradesToDirect(t *testing.T) {
	srv, u := startRelay(t)
	a, b := relayPair(t, u, true)
	dir := t.TempDir()
	peertest.WriteRandomFile(t, filepath.Join(dir, "f.bin"), 4<<20, 9)
	a.Share("docs", dir, true, "beta")
	waitPath(t, b, "alpha", api.PathRelayed, 15*time.Second)

	b.Update(func(f *config.File) error {
		f.PeerByName("alpha").Addr = a.Addr
		return nil
	})
	p := waitPath(t, b, "alpha", api.PathDirect, 15*time.Second)
	if p.RemoteAddr != a.Addr || p.Via != "" {
		t.Errorf("direct link at %q via %q, want %q", p.RemoteAddr, p.Via, a.Addr)
	}
	waitPath(t, a, "beta", api.PathDirect, 5*time.Second)
	// The relayed links drain and close.
	for deadline := time.Now().Add(15 * time.Second); srv.Stats().Active != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("relay still holds %d sessions after the switch", srv.Stats().Active)
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := srv.Stats().Bytes
	dest := filepath.Join(t.TempDir(), "f.bin")
	if _, err := b.N.Pull(context.Background(), api.PullParams{Peer: "alpha", Share: "docs", Path: "f.bin", Dest: dest}, nil); err != nil {
		t.Fatal(err)
	}
	if got := srv.Stats().Bytes - before; got != 0 {
		t.Errorf("the relay carried %d bytes after the switch", got)
	}
}

// TestUnreachablePeerErrorNamesRelays: a command that needs a peer reachable nowhere says
// which relay failed and why.
func TestUnreachablePeerErrorNamesRelays(t *testing.T) {
	_, u := startRelay(t)
	a := peertest.Start(t, "alpha", "")
	addRelay(a, u)
	other, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	a.Update(func(f *config.File) error {
		f.Peers = append(f.Peers, config.Peer{Name: "ghost", ID: other.ID})
		return nil
	})
	_, err = a.N.List(context.Background(), api.ListParams{Peer: "ghost"})
	if api.CodeOf(err) != api.CodePeerUnreachable || !strings.Contains(err.Error(), u.Redacted()) ||
		!strings.Contains(err.Error(), "not waiting at this relay") {
		t.Fatalf("error %v (code %s) does not name the relay and why", err, api.CodeOf(err))
	}
	st, _ := a.N.Status(context.Background())
	c := st.Peers[0].Candidates
	if len(c) != 1 || c[0].Source != "relay" || c[0].Addr != u.Redacted() || c[0].Error == "" {
		t.Errorf("candidates: %+v", c)
	}
}

// TestRelayDownShownInStatus: an unreachable relay is reported with its error.
func TestRelayDownShownInStatus(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	id, _ := identity.Generate()
	u := relay.URL{Host: addr, ID: id.ID}
	a, _ := relayPair(t, u, true)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _ := a.N.Status(context.Background())
		if len(st.Relays) == 1 && !st.Relays[0].Connected && strings.Contains(st.Relays[0].LastError, "refused") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("relay status %+v", st.Relays)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPunchOverRelayedLink: two devices that know no address of each other meet at the relay,
// exchange their candidates over the relayed link (PUNCH) and open a direct link, which
// replaces the relayed one; the relay carries nothing more.
func TestPunchOverRelayedLink(t *testing.T) {
	srv, u := startRelay(t)
	a, b := relayPair(t, u, false)
	dir := t.TempDir()
	peertest.WriteRandomFile(t, filepath.Join(dir, "f.bin"), 2<<20, 3)
	a.Share("docs", dir, true, "beta")

	for _, c := range []struct {
		n     *peertest.Node
		peer  string
		other *peertest.Node
	}{{a, "beta", b}, {b, "alpha", a}} {
		p := waitPath(t, c.n, c.peer, api.PathDirect, 15*time.Second)
		if !slices.ContainsFunc(p.Candidates, func(cs api.CandidateStatus) bool {
			return cs.Source == "peer" && cs.Addr == c.other.Addr
		}) {
			t.Errorf("%s lists no candidate %s from the peer: %+v", c.n.Name, c.other.Addr, p.Candidates)
		}
	}
	for deadline := time.Now().Add(15 * time.Second); srv.Stats().Active != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("relay still holds %d sessions after the switch", srv.Stats().Active)
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := srv.Stats().Bytes
	dest := filepath.Join(t.TempDir(), "f.bin")
	if _, err := b.N.Pull(context.Background(), api.PullParams{Peer: "alpha", Share: "docs", Path: "f.bin", Dest: dest}, nil); err != nil {
		t.Fatal(err)
	}
	if got := srv.Stats().Bytes - before; got != 0 {
		t.Errorf("the relay carried %d bytes after the switch", got)
	}
}

// alpnBlocker is a firewall in front of a relay that lets TLS through unless its ClientHello
// offers the relay's own protocol (peerfs-relay/1), as a network that passes only HTTPS
// would refuse what it does not recognise.
func alpnBlocker(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var hdr [5]byte
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				hello := make([]byte, int(hdr[3])<<8|int(hdr[4]))
				if _, err := io.ReadFull(c, hello); err != nil || bytes.Contains(hello, []byte(relay.ALPN)) {
					return
				}
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				up.Write(append(hdr[:], hello...))
				go func() { io.Copy(c, up); c.Close() }()
				io.Copy(up, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestRelayOverWebSocketWhenTLSBlocked: where raw TLS to the relay is refused, devices reach it
// over the WebSocket on the same port, and meet there.
func TestRelayOverWebSocketWhenTLSBlocked(t *testing.T) {
	_, u := startRelay(t)
	u.Host = alpnBlocker(t, u.Host)
	a, b := relayPair(t, u, true)
	waitPath(t, b, "alpha", api.PathRelayed, 20*time.Second)
	waitPath(t, a, "beta", api.PathRelayed, 5*time.Second)
	for _, n := range []*peertest.Node{a, b} {
		st, _ := n.N.Status(context.Background())
		if len(st.Relays) != 1 || st.Relays[0].Transport != "websocket" {
			t.Errorf("%s: relay status %+v, want transport websocket", n.Name, st.Relays)
		}
	}
	if _, err := b.N.List(context.Background(), api.ListParams{Peer: "alpha"}); err != nil {
		t.Fatal(err)
	}
}

// TestRelayedHandshakesCountPerRelay: streams paired at a relay all come from the relay's
// address, yet more than the per-address cap (8) of them may be in their handshake at once:
// with 9 stalled relayed streams in progress, a peer still links through the relay.
func TestRelayedHandshakesCountPerRelay(t *testing.T) {
	_, u := startRelay(t)
	a, b := peertest.Start(t, "alpha", ""), peertest.Start(t, "beta", "")
	a.Trust(b, false)
	addRelay(a, u)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, _ := a.N.Status(context.Background())
		if len(st.Relays) == 1 && st.Relays[0].Connected {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alpha never waited at the relay: %+v", st.Relays)
		}
	}
	meet := func() *relay.Session {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sess, err := relay.Dial(ctx, u, relay.RoleDial, []relay.ID{relay.DialID(b.ID.ID, a.ID.ID, time.Now())}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}
	// Streams that never send their ClientHello hold a handshake slot each until the
	// handshake timeout (10 s).
	for range 9 {
		stalled := meet()
		defer stalled.Close()
	}
	tcfg := &transport.Config{Identity: b.ID, Trusted: func() []identity.DeviceID { return []identity.DeviceID{a.ID.ID} }}
	conn, err := transport.Client(context.Background(), meet(), tcfg, a.ID.ID)
	if err != nil {
		t.Fatalf("the peer's handshake through the relay behind 9 stalled ones: %v", err)
	}
	conn.Close()
}
