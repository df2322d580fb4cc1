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
// directory, the peer's device ID, the punch deadline and the number of rounds. Each round
// listens on a new port, joins the relay from it, exchanges candidates through the relay,
// punches, and runs the devices' TLS on what it got.
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
	cfg := &transport.Config{Identity: self, Trusted: func() []identity.DeviceID { return []identity.DeviceID{peer} }}
	enc := json.NewEncoder(os.Stdout)
	for i := range rounds {
		r := round{Round: i}
		if err := punchRound(ctx, &r, opener, u, self.ID, peer, cfg, deadline); err != nil {
			r.Err = err.Error()
		}
		enc.Encode(r)
	}
	return nil
}

func punchRound(ctx context.Context, r *round, opener bool, u relay.URL, self, peer identity.DeviceID, cfg *transport.Config, deadline time.Duration) error {
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
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// twoPeers builds a relay on the internet and two hosts behind routers of the given kinds,
// starts a peer in each, and returns each one's rounds.
func twoPeers(t *testing.T, natA, natB netlab.NAT, deadline time.Duration, rounds int) (a, b []round, ids [2]identity.DeviceID, routers [2]*netlab.Router) {
	lab := netlab.New(t)
	relayHost := lab.Public("relay")
	ra := lab.Router("routerA", netlab.RouterOptions{NAT: natA})
	rb := lab.Router("routerB", netlab.RouterOptions{NAT: natB})
	ha, hb := ra.AddHost("a"), rb.AddHost("b")

	url := relayHost.Start("relay", netip.AddrPortFrom(relayHost.Addr, 443).String()).Line(10 * time.Second)
	var dirs [2]string
	for i := range dirs {
		id, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		dirs[i] = filepath.Join(t.TempDir(), "id")
		if err := id.Save(dirs[i]); err != nil {
			t.Fatal(err)
		}
		ids[i] = id.ID
	}
	n := strconv.Itoa(rounds)
	pa := ha.Start("peer", "open", url, dirs[0], ids[1].String(), deadline.String(), n)
	pb := hb.Start("peer", "answer", url, dirs[1], ids[0].String(), deadline.String(), n)
	read := func(p *netlab.Proc) []round {
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
	t.Cleanup(func() {
		// Before the lab's own cleanup (registered earlier) deletes the routers.
		if t.Failed() {
			t.Logf("router A's conntrack:\n%s\nrouter B's:\n%s", ra.Conntrack(), rb.Conntrack())
		}
	})
	a, b = read(pa), read(pb)
	return a, b, ids, [2]*netlab.Router{ra, rb}
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
