package punch

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
)

func listen(t *testing.T) *Listener {
	t.Helper()
	l, err := Listen(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func addrOf(l *Listener) netip.AddrPort { return addrPortOf(l.Addr()) }

type punched struct {
	res *Result
	err error
}

func punchAsync(ctx context.Context, l *Listener, remote netip.AddrPort, opts *Options) <-chan punched {
	ch := make(chan punched, 1)
	go func() {
		r, err := l.Punch(ctx, remote, opts)
		ch <- punched{r, err}
	}()
	return ch
}

// sameConn checks that a and b are the two ends of one connection that carries bytes both
// ways.
func sameConn(t *testing.T, a, b net.Conn) {
	t.Helper()
	if addrPortOf(a.LocalAddr()) != addrPortOf(b.RemoteAddr()) || addrPortOf(b.LocalAddr()) != addrPortOf(a.RemoteAddr()) {
		t.Fatalf("two connections: %s-%s and %s-%s", a.LocalAddr(), a.RemoteAddr(), b.LocalAddr(), b.RemoteAddr())
	}
	for _, dir := range [][2]net.Conn{{a, b}, {b, a}} {
		if _, err := dir[0].Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(dir[1], buf); err != nil || string(buf) != "ping" {
			t.Fatalf("read %q, %v", buf, err)
		}
	}
}

func TestPunchBothSides(t *testing.T) {
	for range 5 {
		a, b := listen(t), listen(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ra := punchAsync(ctx, a, addrOf(b), nil)
		rb := punchAsync(ctx, b, addrOf(a), nil)
		pa, pb := <-ra, <-rb
		cancel()
		if pa.err != nil || pb.err != nil {
			t.Fatalf("punch: %v / %v", pa.err, pb.err)
		}
		// From the listening ports, and one connection between them.
		if got := addrPortOf(pa.res.Conn.LocalAddr()); got != addrOf(a) {
			t.Errorf("a's end is %s, want its listening address %s", got, addrOf(a))
		}
		sameConn(t, pa.res.Conn, pb.res.Conn)
		pa.res.Conn.Close()
		pb.res.Conn.Close()
	}
}

// TestAcceptedCounts: when the peer's connect reaches our listener rather than our own
// connect, the punch returns the accepted connection.
func TestAcceptedCounts(t *testing.T) {
	a, b := listen(t), listen(t)
	bAddr := addrOf(b)
	// b stops listening, so a's first connect is refused and a waits before its next.
	b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ra := punchAsync(ctx, a, bAddr, &Options{RetryInterval: time.Minute})
	time.Sleep(200 * time.Millisecond)
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(bAddr), Control: reusePort}
	cb, err := d.DialContext(ctx, "tcp", addrOf(a).String())
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	pa := <-ra
	if pa.err != nil {
		t.Fatalf("punch: %v", pa.err)
	}
	if !pa.res.Accepted {
		t.Error("the connection came in on the listener, but Accepted is false")
	}
	sameConn(t, pa.res.Conn, cb)
	pa.res.Conn.Close()
}

// TestUnclaimedAccepted: connections no punch waits for go to Accept.
func TestUnclaimedAccepted(t *testing.T) {
	a := listen(t)
	other := netip.MustParseAddrPort("127.0.0.1:9")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ra := punchAsync(ctx, a, other, &Options{RetryInterval: time.Minute})
	c, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := a.Accept()
	if err != nil {
		t.Fatal(err)
	}
	sameConn(t, c, got)
	got.Close()
	cancel()
	if p := <-ra; !errors.Is(p.err, ErrNoPath) {
		t.Errorf("cancelled punch: %v, want ErrNoPath", p.err)
	}
	a.Close()
	if _, err := a.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
}

// TestNoPathWithinDeadline: nobody answers at the peer's address (a router drops the SYNs):
// the punch ends with ErrNoPath when ctx does.
func TestNoPathWithinDeadline(t *testing.T) {
	a := listen(t)
	// A listener that never accepts answers SYNs while its backlog has room; an address
	// nobody listens on refuses them. Both are "no path" once ctx ends.
	dead := listen(t)
	deadAddr := addrOf(dead)
	dead.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	_, err := a.Punch(ctx, deadAddr, nil)
	if !errors.Is(err, ErrNoPath) {
		t.Fatalf("punch to nobody: %v, want ErrNoPath", err)
	}
	if ctx.Err() == nil {
		t.Error("the punch gave up before its deadline")
	}
	t.Log(err)
}

func TestBusy(t *testing.T) {
	a := listen(t)
	other := netip.MustParseAddrPort("127.0.0.1:9")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ra := punchAsync(ctx, a, other, &Options{RetryInterval: time.Minute})
	time.Sleep(50 * time.Millisecond)
	if _, err := a.Punch(ctx, other, nil); !errors.Is(err, ErrBusy) {
		t.Errorf("second punch to the same address: %v, want ErrBusy", err)
	}
	cancel()
	<-ra
}

// TestDialFromListeningPort: DialContext connects from the listening port (what a relay
// then observes).
func TestDialFromListeningPort(t *testing.T) {
	a := listen(t)
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := a.DialContext(context.Background(), "tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := srv.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := addrPortOf(s.RemoteAddr()); got != addrOf(a) {
		t.Errorf("the server saw %s, want the listening address %s", got, addrOf(a))
	}
}

func TestIsTLSClient(t *testing.T) {
	var ids []identity.DeviceID
	for range 4 {
		id, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id.ID)
	}
	for _, x := range ids {
		for _, y := range ids {
			if x == y {
				continue
			}
			if IsTLSClient(x, y) == IsTLSClient(y, x) {
				t.Errorf("%s and %s both think they are the TLS %v", x.Short(), y.Short(), IsTLSClient(x, y))
			}
		}
	}
}

func TestRendezvous(t *testing.T) {
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	ownA := []Candidate{{CandidateObserved, netip.MustParseAddrPort("198.51.100.6:40000")}}
	ownB := []Candidate{
		{CandidateObserved, netip.MustParseAddrPort("198.51.100.10:41000")},
		{CandidateLocal, netip.MustParseAddrPort("[2001:db8::2]:41000")},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type out struct {
		c   []Candidate
		err error
	}
	done := make(chan out, 1)
	go func() {
		c, _, err := Rendezvous(ctx, cb, false, 0, ownB)
		done <- out{c, err}
	}()
	gotB, _, err := Rendezvous(ctx, ca, true, 7, ownA)
	if err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if len(gotB) != 2 || gotB[1] != ownB[1] || len(o.c) != 1 || o.c[0] != ownA[0] {
		t.Errorf("exchanged %v and %v", gotB, o.c)
	}
	// The stream is usable afterwards: no deadline left behind.
	go ca.Write([]byte("x"))
	if _, err := cb.Read(make([]byte, 1)); err != nil {
		t.Errorf("the stream after the rendezvous: %v", err)
	}
}

func TestRendezvousCancelled(t *testing.T) {
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	go io.Copy(io.Discard, cb) // a peer that never answers
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := Rendezvous(ctx, ca, true, 1, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("rendezvous with a silent peer: %v, want DeadlineExceeded", err)
	}
}

// TestPeerCameFirst: the peer's connect arrived before Punch was called (nothing held it
// back) and waits for Accept: Punch takes it instead of failing on a 4-tuple in use.
func TestPeerCameFirst(t *testing.T) {
	a, b := listen(t), listen(t)
	cb, err := b.DialContext(context.Background(), "tcp", addrOf(a).String())
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Queued already, or claimed as the accept loop gets it.
	res, err := a.Punch(ctx, addrOf(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Accepted {
		t.Error("Accepted is false for the peer's connection")
	}
	sameConn(t, res.Conn, cb)
	res.Conn.Close()
}
