//go:build linux

package punch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/netlab"
	"github.com/peerfs/peerfs/internal/punch"
	"github.com/peerfs/peerfs/internal/relay"
	"github.com/peerfs/peerfs/internal/transport"
)

func TestMain(m *testing.M) {
	netlab.Register("relay", serveRelay)
	netlab.Register("peer", runPeer)
	netlab.Main()
	os.Exit(m.Run())
}

// serveRelay runs a relay on :443 and prints its URL, with args[0] as its address.
func serveRelay(ctx context.Context, args []string) error {
	id, err := identity.Generate()
	if err != nil {
		return err
	}
	s, err := relay.New(relay.Config{Identity: id})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", ":443")
	if err != nil {
		return err
	}
	go s.Serve(ln)
	fmt.Println(relay.URL{Host: args[0], ID: id.ID})
	<-ctx.Done()
	return s.Close()
}

// round is what a peer reports of one punch, one JSON line each.
type round struct {
	Round    int    `json:"round"`
	Observed string `json:"observed"` // this peer, as the relay saw it
	Peer     string `json:"peer"`     // the peer's candidate it punched to
	RTTms    float64
	PunchMs  float64 // from Punch to the connection
	Accepted bool
	Attempts int
	TLSPeer  string // the device ID the TLS handshake on the punched connection proved
	Err      string
}

// runPeer: args are the role (open or answer), the relay URL, this device's identity
// directory, the peer's device ID, the punch deadline, the number of rounds, and optionally
// "hold". Each round listens on a new port, joins the relay from it, exchanges candidates
// through the relay, punches, runs the devices' TLS on what it got and reports the round as
// a JSON line. With "hold" (one round) it then keeps the punched link and the relayed
// stream open and reports their health (holdLinks).
func runPeer(ctx context.Context, args []string) error {
	opener := args[0] == "open"
	u, err := relay.ParseURL(args[1])
	if err != nil {
		return err
	}
	self, err := identity.Load(args[2])
	if err != nil {
		return err
	}
	peer, err := identity.ParseDeviceID(args[3])
	if err != nil {
		return err
	}
	deadline, err := time.ParseDuration(args[4])
	if err != nil {
		return err
	}
	rounds, _ := strconv.Atoi(args[5])
	hold := len(args) > 6 && args[6] == "hold"
	cfg := &transport.Config{Identity: self, Trusted: func() []identity.DeviceID { return []identity.DeviceID{peer} }}
	enc := json.NewEncoder(os.Stdout)
	for i := range rounds {
		r := round{Round: i}
		reported := false
		report := func() {
			enc.Encode(r)
			reported = true
		}
		if err := punchRound(ctx, &r, opener, u, self.ID, peer, cfg, deadline, hold, report); err != nil {
			r.Err = err.Error()
		}
		if !reported {
			report()
		}
	}
	return nil
}

// holdLinks sends a byte every 50 ms each way on the punched link and on the relayed stream,
// and prints every 100 ms "status D R": the milliseconds since a byte last came on each.
func holdLinks(ctx context.Context, direct, relayed net.Conn) error {
	var last [2]atomic.Int64
	for i, c := range []net.Conn{direct, relayed} {
		last[i].Store(time.Now().UnixNano())
		go func() {
			for ctx.Err() == nil {
				c.Write([]byte{0})
				time.Sleep(50 * time.Millisecond)
			}
		}()
		go func() {
			b := make([]byte, 64)
			for {
				if _, err := c.Read(b); err != nil {
					return
				}
				last[i].Store(time.Now().UnixNano())
			}
		}()
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			now := time.Now().UnixNano()
			fmt.Println("status", (now-last[0].Load())/1e6, (now-last[1].Load())/1e6)
		}
	}
}

func punchRound(ctx context.Context, r *round, opener bool, u relay.URL, self, peer identity.DeviceID, cfg *transport.Config, deadline time.Duration, hold bool, report func()) error {
	ln, err := punch.Listen(ctx, ":0")
	if err != nil {
		return err
	}
	defer ln.Close()
	jctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	role, ids := relay.RoleListen, relay.ListenIDs(self, []identity.DeviceID{peer}, time.Now())
	if opener {
		role, ids = relay.RoleDial, []relay.ID{relay.DialID(self, peer, time.Now())}
	}
	// Joined from the listening port: the relay observes the mapping the punch will use.
	sess, err := relay.Dial(jctx, u, role, ids, &relay.Options{DialContext: ln.DialContext})
	if err != nil {
		return err
	}
	defer sess.Close()
	r.Observed = sess.Observed.String()
	own := []punch.Candidate{{Kind: punch.CandidateObserved, Addr: sess.Observed}}
	cands, rtt, err := punch.Rendezvous(jctx, sess, opener, uint32(r.Round), own)
	if err != nil {
		return err
	}
	r.RTTms = ms(rtt)
	i := slices.IndexFunc(cands, func(c punch.Candidate) bool { return c.Kind == punch.CandidateObserved })
	if i < 0 {
		return errors.New("the peer sent no observed candidate")
	}
	r.Peer = cands[i].Addr.String()
	pctx, pcancel := context.WithTimeout(ctx, deadline)
	defer pcancel()
	res, err := ln.Punch(pctx, cands[i].Addr, nil)
	if err != nil {
		return err
	}
	defer res.Conn.Close()
	r.PunchMs, r.Accepted, r.Attempts = ms(res.Elapsed), res.Accepted, res.Attempts
	var tc *transport.Conn
	if punch.IsTLSClient(self, peer) {
		tc, err = transport.Client(ctx, res.Conn, cfg, peer)
	} else {
		tc, err = transport.Server(ctx, res.Conn, cfg)
	}
	if err != nil {
		return fmt.Errorf("TLS on the punched connection: %w", err)
	}
	r.TLSPeer = tc.Peer.String()
	// One byte each way proves the link carries data.
	if _, err := tc.Write([]byte{1}); err != nil {
		return err
	}
	if _, err := io.ReadFull(tc, make([]byte, 1)); err != nil {
		return err
	}
	if hold {
		report()
		return holdLinks(ctx, tc, sess)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// punchLab is a relay on the internet and two hosts behind routers, with identities for
// two devices that trust each other.
type punchLab struct {
	lab     *netlab.Lab
	relay   *netlab.Proc
	routers [2]*netlab.Router
	hosts   [2]*netlab.Host
	url     string
	dirs    [2]string
	ids     [2]identity.DeviceID
}

// newPunchLab: a NAT of 0 puts that host on the internet with no router.
func newPunchLab(t *testing.T, natA, natB netlab.NAT) *punchLab {
	lab := netlab.New(t)
	pl := &punchLab{lab: lab}
	relayHost := lab.Public("relay")
	for i, nat := range []netlab.NAT{natA, natB} {
		name := string(rune('a' + i))
		if nat == 0 {
			pl.hosts[i] = lab.Public(name) // a public address, no router
			continue
		}
		pl.routers[i] = lab.Router("router"+strings.ToUpper(name), netlab.RouterOptions{NAT: nat})
		pl.hosts[i] = pl.routers[i].AddHost(name)
	}
	pl.relay = relayHost.Start("relay", netip.AddrPortFrom(relayHost.Addr, 443).String())
	pl.url = pl.relay.Line(10 * time.Second)
	for i := range pl.dirs {
		id, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		pl.dirs[i] = filepath.Join(t.TempDir(), "id")
		if err := id.Save(pl.dirs[i]); err != nil {
			t.Fatal(err)
		}
		pl.ids[i] = id.ID
	}
	t.Cleanup(func() {
		// Before the lab's own cleanup (registered earlier) deletes the routers.
		if !t.Failed() {
			return
		}
		for _, r := range pl.routers {
			if r != nil {
				t.Logf("%s's conntrack:\n%s", r.Name, r.Conntrack())
			}
		}
	})
	return pl
}

// start runs the two peers (A opens) with the rest of runPeer's arguments.
func (pl *punchLab) start(deadline time.Duration, rounds int, extra ...string) [2]*netlab.Proc {
	n := strconv.Itoa(rounds)
	return [2]*netlab.Proc{
		pl.hosts[0].Start("peer", append([]string{"open", pl.url, pl.dirs[0], pl.ids[1].String(), deadline.String(), n}, extra...)...),
		pl.hosts[1].Start("peer", append([]string{"answer", pl.url, pl.dirs[1], pl.ids[0].String(), deadline.String(), n}, extra...)...),
	}
}

func readRounds(t *testing.T, p *netlab.Proc, rounds int, deadline time.Duration) []round {
	t.Helper()
	var rs []round
	for range rounds {
		var r round
		line := p.Line(deadline + 30*time.Second)
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("peer wrote %q: %v", line, err)
		}
		rs = append(rs, r)
	}
	return rs
}

// twoPeers runs rounds of punching between hosts behind routers of the given kinds and
// returns each side's rounds.
func twoPeers(t *testing.T, natA, natB netlab.NAT, deadline time.Duration, rounds int) (a, b []round, ids [2]identity.DeviceID, routers [2]*netlab.Router) {
	pl := newPunchLab(t, natA, natB)
	p := pl.start(deadline, rounds)
	return readRounds(t, p[0], rounds, deadline), readRounds(t, p[1], rounds, deadline), pl.ids, pl.routers
}

// TestPunchHomeNATs: two hosts behind two home routers (port-preserving masquerade, nothing
// new in from the WAN) meet at a relay, exchange the addresses it observed, and punch a
// direct TCP connection that then carries their mutual TLS.
func TestPunchHomeNATs(t *testing.T) {
	const rounds = 5
	a, b, ids, routers := twoPeers(t, netlab.HomeNAT, netlab.HomeNAT, 10*time.Second, rounds)
	var times []float64
	for i := range rounds {
		ra, rb := a[i], b[i]
		if ra.Err != "" || rb.Err != "" {
			t.Errorf("round %d: punch failed: A: %s; B: %s", i, ra.Err, rb.Err)
			continue
		}
		// The relay saw each behind its router, and each punched to what the relay saw of
		// the other.
		if ap, _ := netip.ParseAddrPort(ra.Observed); ap.Addr() != routers[0].Addr {
			t.Errorf("round %d: relay saw A at %s, want its router %s", i, ra.Observed, routers[0].Addr)
		}
		if ra.Peer != rb.Observed || rb.Peer != ra.Observed {
			t.Errorf("round %d: A punched %s (B observed at %s), B punched %s (A at %s)", i, ra.Peer, rb.Observed, rb.Peer, ra.Observed)
		}
		if ra.TLSPeer != ids[1].String() || rb.TLSPeer != ids[0].String() {
			t.Errorf("round %d: TLS proved %s and %s", i, ra.TLSPeer, rb.TLSPeer)
		}
		t.Logf("round %d: relay RTT %.2f ms; punch A %.2f ms (%d connects, accepted %v), B %.2f ms (%d, accepted %v)",
			i, ra.RTTms, ra.PunchMs, ra.Attempts, ra.Accepted, rb.PunchMs, rb.Attempts, rb.Accepted)
		times = append(times, max(ra.PunchMs+ra.RTTms/2, rb.PunchMs))
	}
	if len(times) > 0 {
		slices.Sort(times)
		t.Logf("time to punch from START sent to both connected: median %.2f ms (%.2f-%.2f), %d rounds",
			times[len(times)/2], times[0], times[len(times)-1], len(times))
	}
}

// TestPunchPublicAndHome: one device has a public address, the other is behind a home
// router. The public one's SYNs are dropped by the router until the other's SYN opens it;
// the other's SYN reaches the public device's socket, connecting or accepted: either way one
// connection, and the TLS on it works.
func TestPunchPublicAndHome(t *testing.T) {
	const rounds = 3
	a, b, ids, _ := twoPeers(t, 0, netlab.HomeNAT, 10*time.Second, rounds)
	for i := range rounds {
		if a[i].Err != "" || b[i].Err != "" {
			t.Errorf("round %d: A (public): %s; B (home NAT): %s", i, a[i].Err, b[i].Err)
			continue
		}
		if a[i].TLSPeer != ids[1].String() || b[i].TLSPeer != ids[0].String() {
			t.Errorf("round %d: TLS proved %s and %s", i, a[i].TLSPeer, b[i].TLSPeer)
		}
		t.Logf("round %d: A (public) %.2f ms, %d connects, accepted %v; B %.2f ms, %d connects, accepted %v",
			i, a[i].PunchMs, a[i].Attempts, a[i].Accepted, b[i].PunchMs, b[i].Attempts, b[i].Accepted)
	}
}

// TestPunchSymmetricNAT: behind a symmetric NAT the port the relay observed is not the one
// the punch leaves from; both sides give up at their deadline with ErrNoPath's message.
func TestPunchSymmetricNAT(t *testing.T) {
	const deadline = 3 * time.Second
	a, b, _, _ := twoPeers(t, netlab.HomeNAT, netlab.SymmetricNAT, deadline, 1)
	for name, r := range map[string]round{"A (home)": a[0], "B (symmetric)": b[0]} {
		if r.Err == "" {
			t.Errorf("%s: the punch through a symmetric NAT succeeded (%+v)", name, r)
			continue
		}
		if !strings.Contains(r.Err, punch.ErrNoPath.Error()) {
			t.Errorf("%s: %s, want %q", name, r.Err, punch.ErrNoPath)
		}
		t.Logf("%s: %s", name, r.Err)
	}
}

// health is one "status" line of holdLinks: how long since each link last delivered.
type health struct{ direct, relayed time.Duration }

// waitHealth reads p's status lines until ok holds for one, or fails the test after timeout.
func waitHealth(t *testing.T, p *netlab.Proc, what string, timeout time.Duration, ok func(health) bool) health {
	t.Helper()
	var h health
	for end := time.Now().Add(timeout); time.Now().Before(end); {
		var d, r int64
		line := p.Line(5 * time.Second)
		if _, err := fmt.Sscanf(line, "status %d %d", &d, &r); err != nil {
			t.Fatalf("peer: %q", line)
		}
		h = health{time.Duration(d) * time.Millisecond, time.Duration(r) * time.Millisecond}
		if ok(h) {
			return h
		}
	}
	t.Fatalf("%s: not within %v (last: direct silent %v, relayed silent %v)", what, timeout, h.direct, h.relayed)
	return h
}

// TestPunchedPathCutAndRelayGone: after a punch the devices hold the direct link and the
// relayed stream. Cutting the path between the two routers silences the direct link while
// the relayed stream goes on (what a fallback to the relay rests on); restoring it revives
// the same connection; stopping the relay leaves the direct link untouched.
func TestPunchedPathCutAndRelayGone(t *testing.T) {
	pl := newPunchLab(t, netlab.HomeNAT, netlab.HomeNAT)
	p := pl.start(10*time.Second, 1, "hold")
	for i, rs := range [][]round{readRounds(t, p[0], 1, 10*time.Second), readRounds(t, p[1], 1, 10*time.Second)} {
		if rs[0].Err != "" {
			t.Fatalf("peer %d: punch failed: %s", i, rs[0].Err)
		}
	}
	alive := func(d time.Duration) bool { return d < 400*time.Millisecond }
	dead := func(d time.Duration) bool { return d > 1500*time.Millisecond }
	for _, q := range p {
		waitHealth(t, q, "both links alive", 5*time.Second, func(h health) bool { return alive(h.direct) && alive(h.relayed) })
	}

	cut := time.Now()
	restore := pl.lab.Cut(pl.routers[0].Addr, pl.routers[1].Addr)
	for _, q := range p {
		waitHealth(t, q, "the direct link silent and the relayed one alive after the cut", 10*time.Second,
			func(h health) bool { return dead(h.direct) && alive(h.relayed) })
	}
	restore()
	restored := time.Now()
	t.Logf("path cut for %v", restored.Sub(cut).Round(time.Millisecond))
	for i, q := range p {
		// TCP retransmits on its backoff: the next retransmission after the restore gets
		// through.
		waitHealth(t, q, "the direct link alive again after the restore", 20*time.Second, func(h health) bool { return alive(h.direct) })
		t.Logf("peer %d: direct link delivering again %v after the restore", i, time.Since(restored).Round(time.Millisecond))
	}

	pl.relay.Stop()
	for _, q := range p {
		h := waitHealth(t, q, "the relayed stream silent once the relay stopped", 10*time.Second, func(h health) bool { return dead(h.relayed) })
		if !alive(h.direct) {
			t.Errorf("the direct link went silent (%v) when the relay stopped", h.direct)
		}
	}
}
