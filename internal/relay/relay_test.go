package relay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/transport"
)

func newIdentity(t testing.TB) *identity.Identity {
	t.Helper()
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// startRelay runs a relay on a loopback port; wrap, if set, wraps its listener.
func startRelay(t testing.TB, cfg Config, wrap func(net.Listener) net.Listener) (*Server, URL) {
	t.Helper()
	if cfg.Identity == nil {
		cfg.Identity = newIdentity(t)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, URL{Host: ln.Addr().String(), ID: s.ID(), Token: cfg.Token}
}

type dialResult struct {
	sess *Session
	err  error
}

func dialAsync(ctx context.Context, u URL, role Role, ids []ID, opts *Options) <-chan dialResult {
	ch := make(chan dialResult, 1)
	go func() {
		s, err := Dial(ctx, u, role, ids, opts)
		ch <- dialResult{s, err}
	}()
	return ch
}

// waitPending waits until the relay holds n waiting joins.
func waitPending(t testing.TB, s *Server, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.Stats().Pending != n; {
		if time.Now().After(deadline) {
			t.Fatalf("relay holds %d waiting joins, want %d", s.Stats().Pending, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// devices are two devices that trust each other: a listens at the relay, b dials it.
type devices struct {
	a, b *identity.Identity
}

func newDevices(t testing.TB) devices { return devices{newIdentity(t), newIdentity(t)} }

func (d devices) config(self, peer *identity.Identity) *transport.Config {
	return &transport.Config{Identity: self, Trusted: func() []identity.DeviceID { return []identity.DeviceID{peer.ID} }}
}

// pairRaw pairs the two devices at u and returns the raw relayed streams (a's, b's).
func pairRaw(t testing.TB, s *Server, u URL, d devices, optsA, optsB *Options) (*Session, *Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	before := s.Stats().Pending
	la := dialAsync(ctx, u, RoleListen, ListenIDs(d.a.ID, []identity.DeviceID{d.b.ID}, time.Now()), optsA)
	waitPending(t, s, before+1)
	sb, err := Dial(ctx, u, RoleDial, []ID{DialID(d.b.ID, d.a.ID, time.Now())}, optsB)
	if err != nil {
		t.Fatalf("dialling device: %v", err)
	}
	ra := <-la
	if ra.err != nil {
		t.Fatalf("listening device: %v", ra.err)
	}
	t.Cleanup(func() { ra.sess.Close(); sb.Close() })
	return ra.sess, sb
}

// pairTLS pairs the devices and runs their mutual TLS inside the relayed stream.
func pairTLS(t testing.TB, s *Server, u URL, d devices, optsA, optsB *Options) (a, b *transport.Conn) {
	t.Helper()
	sa, sb := pairRaw(t, s, u, d, optsA, optsB)
	ctx := context.Background()
	srv := make(chan error, 1)
	go func() {
		var err error
		a, err = transport.Server(ctx, sa, d.config(d.a, d.b))
		srv <- err
	}()
	b, err := transport.Client(ctx, sb, d.config(d.b, d.a), d.a.ID)
	if err != nil {
		t.Fatalf("inner TLS, dialling side: %v", err)
	}
	if err := <-srv; err != nil {
		t.Fatalf("inner TLS, listening side: %v", err)
	}
	if a.Peer != d.b.ID || b.Peer != d.a.ID {
		t.Fatalf("inner TLS peers %s, %s; want %s, %s", a.Peer, b.Peer, d.b.ID, d.a.ID)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// stream sends n pseudo-random bytes (seeded) from w to r, closing w's writing side, and
// checks r received them all, in order.
func stream(t testing.TB, w io.Writer, r io.Reader, n int64, seed uint64) {
	t.Helper()
	var wg sync.WaitGroup
	var sent [32]byte
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		h := sha256.New()
		src := io.LimitReader(rand.NewChaCha8([32]byte{byte(seed)}), n)
		_, werr = io.Copy(io.MultiWriter(w, h), src)
		copy(sent[:], h.Sum(nil))
	}()
	h := sha256.New()
	got, rerr := io.CopyN(h, r, n)
	wg.Wait()
	if werr != nil || rerr != nil {
		t.Fatalf("stream of %d bytes: write: %v, read (%d bytes): %v", n, werr, got, rerr)
	}
	if !bytes.Equal(h.Sum(nil), sent[:]) {
		t.Fatalf("stream of %d bytes arrived altered", n)
	}
}

// TestRelayedLinkBothWays: two real transport endpoints, mutual TLS with pinned IDs, run
// through a real relay and move data both ways at once, 256 MiB one way; the relay's
// counters show the bytes.
func TestRelayedLinkBothWays(t *testing.T) {
	s, u := startRelay(t, Config{}, nil)
	d := newDevices(t)
	a, b := pairTLS(t, s, u, d, nil, nil)
	big := int64(256 << 20)
	if testing.Short() {
		big = 32 << 20
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		stream(t, b, a, 4<<20, 2)
	}()
	stream(t, a, b, big, 1)
	wg.Wait()
	st := s.Stats()
	if st.Sessions != 1 || st.Active != 1 {
		t.Errorf("sessions %d, active %d; want 1, 1", st.Sessions, st.Active)
	}
	if st.Bytes < big+4<<20 {
		t.Errorf("relay counted %d bytes, want at least %d", st.Bytes, big+4<<20)
	}
}

// TestObservedAddress: PAIRED tells each device the address the relay sees it from.
func TestObservedAddress(t *testing.T) {
	s, u := startRelay(t, Config{}, nil)
	sa, sb := pairRaw(t, s, u, newDevices(t), nil, nil)
	for _, sess := range []*Session{sa, sb} {
		if got, want := sess.Observed.String(), sess.LocalAddr().String(); got != want {
			t.Errorf("observed %s, want %s", got, want)
		}
	}
}

// TestWrongRelayRefused: a relay whose key does not hash to the URL's ID is refused at the
// handshake, before anything is sent.
func TestWrongRelayRefused(t *testing.T) {
	s, u := startRelay(t, Config{}, nil)
	u.ID = newIdentity(t).ID
	_, err := Dial(context.Background(), u, RoleDial, []ID{{1}}, nil)
	if !errors.Is(err, ErrWrongRelay) {
		t.Fatalf("err = %v, want ErrWrongRelay", err)
	}
	if st := s.Stats(); st.Pending != 0 || st.Refusals["bad_join"] != 0 {
		t.Errorf("the relay got a join from a device that refused it: %+v", st)
	}
}

// TestToken: a private relay refuses joins without its token or with a wrong one, saying
// what to do, and pairs those with it.
func TestToken(t *testing.T) {
	s, u := startRelay(t, Config{Token: "s3cret"}, nil)
	for _, tok := range []string{"", "wrong"} {
		v := u
		v.Token = tok
		_, err := Dial(context.Background(), v, RoleListen, []ID{{1}}, nil)
		if !errors.Is(err, ErrRelayToken) || !strings.Contains(err.Error(), "&token=") {
			t.Errorf("token %q: err = %v, want ErrRelayToken saying to add &token=", tok, err)
		}
	}
	if got := s.Stats().Refusals["token"]; got != 2 {
		t.Errorf("token refusals counted: %d, want 2", got)
	}
	pairRaw(t, s, u, newDevices(t), nil, nil)
}

// TestSessionCap: past MaxSessions a join that would pair is refused with a message that
// says to try later or elsewhere; the waiting partner stays parked.
func TestSessionCap(t *testing.T) {
	s, u := startRelay(t, Config{MaxSessions: 1}, nil)
	pairRaw(t, s, u, newDevices(t), nil, nil)
	d := newDevices(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dialAsync(ctx, u, RoleListen, ListenIDs(d.a.ID, []identity.DeviceID{d.b.ID}, time.Now()), nil)
	waitPending(t, s, 1)
	_, err := Dial(ctx, u, RoleDial, []ID{DialID(d.b.ID, d.a.ID, time.Now())}, nil)
	if !errors.Is(err, ErrRelayFull) || !strings.Contains(err.Error(), "another relay") {
		t.Fatalf("err = %v, want ErrRelayFull saying what to do", err)
	}
	if st := s.Stats(); st.Refusals["full"] != 1 || st.Pending != 1 {
		t.Errorf("full refusals %d, pending %d; want 1, 1", st.Refusals["full"], st.Pending)
	}
}

// TestPendingTimeout: a join nobody answers is refused after PendingTimeout.
func TestPendingTimeout(t *testing.T) {
	s, u := startRelay(t, Config{PendingTimeout: 200 * time.Millisecond}, nil)
	_, err := Dial(context.Background(), u, RoleListen, []ID{{7}}, nil)
	if !errors.Is(err, ErrNoPartner) {
		t.Fatalf("err = %v, want ErrNoPartner", err)
	}
	if st := s.Stats(); st.Pending != 0 || st.Refusals["timeout"] != 1 {
		t.Errorf("pending %d, timeout refusals %d; want 0, 1", st.Pending, st.Refusals["timeout"])
	}
}

// TestReplaced: a newer listening join for the same IDs takes over; the older one is told.
func TestReplaced(t *testing.T) {
	s, u := startRelay(t, Config{}, nil)
	old := dialAsync(context.Background(), u, RoleListen, []ID{{9}}, nil)
	waitPending(t, s, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dialAsync(ctx, u, RoleListen, []ID{{9}}, nil)
	if r := <-old; !errors.Is(r.err, ErrReplaced) {
		t.Fatalf("older join: err = %v, want ErrReplaced", r.err)
	}
	waitPending(t, s, 1)
}

// fromIP dials from a given loopback source address (Linux routes all of 127.0.0.0/8 to lo).
func fromIP(ip string) *Options {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &Options{DialContext: d.DialContext}
}

// TestPerIPCap: past MaxConnsPerIP the relay refuses an address's connections at the
// handshake; other addresses still get in.
func TestPerIPCap(t *testing.T) {
	if c, err := net.Dial("tcp", "127.0.0.1:1"); err == nil {
		c.Close()
	}
	probe, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).Dial("udp", "127.0.0.1:9")
	if err != nil {
		t.Skipf("cannot send from 127.0.0.2 on this system: %v", err)
	}
	probe.Close()
	s, u := startRelay(t, Config{MaxConnsPerIP: 2}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dialAsync(ctx, u, RoleListen, []ID{{1}}, fromIP("127.0.0.2"))
	dialAsync(ctx, u, RoleListen, []ID{{2}}, fromIP("127.0.0.2"))
	waitPending(t, s, 2)
	_, err = Dial(ctx, u, RoleListen, []ID{{3}}, fromIP("127.0.0.2"))
	if !errors.Is(err, ErrRelayRefused) || !strings.Contains(err.Error(), "too many connections from this address") {
		t.Fatalf("third connection: err = %v, want ErrRelayRefused naming the per-address cap", err)
	}
	dialAsync(ctx, u, RoleListen, []ID{{4}}, fromIP("127.0.0.3"))
	waitPending(t, s, 3)
	if got := s.Stats().Refusals["per_ip"]; got != 1 {
		t.Errorf("per-address refusals %d, want 1", got)
	}
}

// TestAbuseDoesNotStopSession: 1,000 half-open connections and connections sending random
// bytes (some after a TLS record type byte) arrive while a session moves data; the session
// finishes intact and the relay still pairs new devices.
func TestAbuseDoesNotStopSession(t *testing.T) {
	s, u := startRelay(t, Config{MaxConnsPerIP: 5000, MaxConns: 5000, JoinTimeout: 30 * time.Second}, nil)
	d := newDevices(t)
	a, b := pairTLS(t, s, u, d, nil, nil)

	done := make(chan struct{})
	go func() {
		defer close(done)
		stream(t, a, b, 64<<20, 3)
	}()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 1100 {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatalf("abusive connection %d: %v", i, err)
		}
		conns = append(conns, c)
		switch {
		case i < 1000: // half-open: connect and say nothing
		case i%2 == 0:
			junk := make([]byte, 1+rng.IntN(4096))
			for j := range junk {
				junk[j] = byte(rng.Uint32())
			}
			c.Write(junk)
		default:
			junk := make([]byte, 512)
			for j := range junk {
				junk[j] = byte(rng.Uint32())
			}
			junk[0] = 0x16
			c.Write(junk)
		}
	}
	<-done
	// Still serving: a new pair meets and talks.
	a2, b2 := pairTLS(t, s, u, newDevices(t), nil, nil)
	stream(t, b2, a2, 1<<20, 4)
}

// TestWebSocket: the same protocol over a WebSocket, inside the relay's TLS or in clear,
// paired with a WebSocket or a raw TLS device.
func TestWebSocket(t *testing.T) {
	s, u := startRelay(t, Config{}, nil)
	for _, tc := range []struct {
		name string
		a, b Transport
	}{
		{"wss both", TransportWebSocket, TransportWebSocket},
		{"wss and raw TLS", TransportWebSocket, TransportTLS},
		{"plain ws and raw TLS", TransportTLS, TransportPlainWebSocket},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pairTLS(t, s, u, newDevices(t), &Options{Transport: tc.a}, &Options{Transport: tc.b})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				stream(t, b, a, 1<<20, 6)
			}()
			stream(t, a, b, 8<<20, 5)
			wg.Wait()
		})
	}
	if got := s.Stats().Connections["websocket"]; got != 4 {
		t.Errorf("WebSocket connections counted: %d, want 4", got)
	}
}

// captureListener records every byte the relay reads from its connections.
type captureListener struct {
	net.Listener
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *captureListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &captureConn{Conn: c, l: l}, nil
}

func (l *captureListener) seen() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.buf.Bytes())
}

type captureConn struct {
	net.Conn
	l *captureListener
}

func (c *captureConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.mu.Lock()
	c.l.buf.Write(p[:n])
	c.l.mu.Unlock()
	return n, err
}

func (c *captureConn) CloseWrite() error { return c.Conn.(*net.TCPConn).CloseWrite() }

// TestRelaySeesNoPlaintext: a marker sent inside the devices' TLS never appears in what
// the relay reads; the same marker sent raw through a relayed stream does (the capture
// works).
func TestRelaySeesNoPlaintext(t *testing.T) {
	var capture *captureListener
	s, u := startRelay(t, Config{}, func(ln net.Listener) net.Listener {
		capture = &captureListener{Listener: ln}
		return capture
	})
	marker := []byte("MARKER-7f3a9c-the-relay-must-never-read-this")
	payload := bytes.Repeat(marker, 1000)

	a, b := pairTLS(t, s, u, newDevices(t), nil, nil)
	if _, err := b.Write(payload); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(a, make([]byte, len(payload))); err != nil {
		t.Fatal(err)
	}
	seen := capture.seen()
	if len(seen) < len(payload) {
		t.Fatalf("the relay read %d bytes, fewer than the %d sent: the capture misses the stream", len(seen), len(payload))
	}
	if bytes.Contains(seen, marker) {
		t.Fatal("the marker sent inside the devices' TLS appears in what the relay read")
	}

	ra, rb := pairRaw(t, s, u, newDevices(t), nil, nil)
	if _, err := rb.Write(marker); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(ra, make([]byte, len(marker))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(capture.seen(), marker) {
		t.Fatal("a marker sent raw through the relay is not in the capture: the capture does not see the stream")
	}
}

// waitActive waits until the relay holds n sessions.
func waitActive(t testing.TB, s *Server, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.Stats().Active != n; {
		if time.Now().After(deadline) {
			t.Fatalf("relay holds %d sessions, want %d", s.Stats().Active, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSessionEndFreesItsPlace: when both devices close, the session ends, both of its
// connections are closed at the relay and its place counts once: with room for one
// session, the next pair meets.
func TestSessionEndFreesItsPlace(t *testing.T) {
	s, u := startRelay(t, Config{MaxSessions: 1}, nil)
	for range 3 {
		a, b := pairRaw(t, s, u, newDevices(t), nil, nil)
		waitActive(t, s, 1)
		a.Close()
		b.Close()
		waitActive(t, s, 0)
	}
	if st := s.Stats(); st.Sessions != 3 || st.Refusals["full"] != 0 {
		t.Errorf("sessions %d, full refusals %d; want 3, 0", st.Sessions, st.Refusals["full"])
	}
}

// TestHalfClose: when one device finishes sending (TCP FIN), the other still gets every
// byte and can answer; the session ends when both are done.
func TestHalfClose(t *testing.T) {
	s, u := startRelay(t, Config{}, nil)
	a, b := pairRaw(t, s, u, newDevices(t), nil, nil)
	if _, err := b.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	if err := b.Conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(a)
	if err != nil || string(got) != "request" {
		t.Fatalf("listening device read %q, %v; want the request, then EOF", got, err)
	}
	if _, err := a.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	a.Conn.(*net.TCPConn).CloseWrite()
	got, err = io.ReadAll(b)
	if err != nil || string(got) != "answer" {
		t.Fatalf("dialling device read %q, %v; want the answer, then EOF", got, err)
	}
	waitActive(t, s, 0)
}

// TestIdleTimeout: a session through which nothing moves ends after IdleTimeout; one that
// keeps moving bytes does not.
func TestIdleTimeout(t *testing.T) {
	s, u := startRelay(t, Config{IdleTimeout: 400 * time.Millisecond}, nil)
	a, b := pairRaw(t, s, u, newDevices(t), nil, nil)
	for range 8 { // 1.6 s, four idle timeouts, of a keepalive every 200 ms
		time.Sleep(200 * time.Millisecond)
		if _, err := b.Write([]byte{1}); err != nil {
			t.Fatalf("a busy session was cut: %v", err)
		}
		if _, err := io.ReadFull(a, make([]byte, 1)); err != nil {
			t.Fatalf("a busy session was cut: %v", err)
		}
	}
	a.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := a.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle session: read = %v, want EOF once the relay ends it", err)
	}
	if got := s.Stats().IdleEnded; got != 1 {
		t.Errorf("idle-ended sessions %d, want 1", got)
	}
}

// TestSessionRate: a session held to a rate moves its bytes no faster than that (with the
// bucket's burst), and intact.
func TestSessionRate(t *testing.T) {
	const rateBps = 512 << 10
	s, u := startRelay(t, Config{SessionRate: rateBps}, nil)
	a, b := pairRaw(t, s, u, newDevices(t), nil, nil)
	start := time.Now()
	stream(t, b, a, 1<<20, 8)
	// 1 MiB at 512 KiB/s with a 64 KiB burst takes at least 1.8 s.
	if el := time.Since(start); el < 1500*time.Millisecond {
		t.Errorf("1 MiB at %d B/s took %v: the rate limit is not applied", rateBps, el)
	}
}

// TestJoinFlood: past MaxPending, joins are refused as full, and the waiting ones still pair.
func TestJoinFlood(t *testing.T) {
	s, u := startRelay(t, Config{MaxPending: 3}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := newDevices(t)
	dialAsync(ctx, u, RoleListen, ListenIDs(d.a.ID, []identity.DeviceID{d.b.ID}, time.Now()), nil)
	for i := range 2 {
		dialAsync(ctx, u, RoleListen, []ID{{byte(i + 1)}}, nil)
	}
	waitPending(t, s, 3)
	for range 5 {
		if _, err := Dial(ctx, u, RoleListen, []ID{{99}}, nil); !errors.Is(err, ErrRelayFull) {
			t.Fatalf("join past MaxPending: err = %v, want ErrRelayFull", err)
		}
	}
	sess, err := Dial(ctx, u, RoleDial, []ID{DialID(d.b.ID, d.a.ID, time.Now())}, nil)
	if err != nil {
		t.Fatalf("a dialler meeting a waiting join: %v", err)
	}
	sess.Close()
}

// TestJoinTimeout: a connection that does not complete its join in JoinTimeout is closed,
// and its place under the caps given back.
func TestJoinTimeout(t *testing.T) {
	s, u := startRelay(t, Config{JoinTimeout: 300 * time.Millisecond, MaxConnsPerIP: 2}, nil)
	for range 2 {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte{0x16, 3, 1}) // the start of a ClientHello, then nothing
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("a silent connection was not closed by the relay: %v", err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); s.Stats().Open != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open at the relay", s.Stats().Open)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Both places are free again: two devices from this address meet.
	pairRaw(t, s, u, newDevices(t), nil, nil)
}

// TestWebSocketJoinTimeout: a device that opens a WebSocket and its TLS but sends no join
// is closed after JoinTimeout, as over raw TLS.
func TestWebSocketJoinTimeout(t *testing.T) {
	s, u := startRelay(t, Config{JoinTimeout: 300 * time.Millisecond}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, err := dialWebSocket(ctx, u, false, (&net.Dialer{}).DialContext)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	tc := tls.Client(ws, clientTLS(u, ALPN))
	if err := tc.HandshakeContext(ctx); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() {
		_, err := tc.Read(make([]byte, 1))
		closed <- err
	}()
	select {
	case err := <-closed:
		if err == nil {
			t.Fatal("the relay sent data to a device that never joined")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the relay kept a WebSocket that never joined open for 5 s")
	}
	for s.Stats().Open != 0 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	if n := s.Stats().Open; n != 0 {
		t.Fatalf("%d connections still open at the relay", n)
	}
}

// failingListener fails its first Accepts as a listener out of file descriptors does.
type failingListener struct {
	net.Listener
	fails int
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.fails > 0 {
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAcceptErrorsDoNotStopRelay: a relay out of file descriptors waits and goes on
// accepting rather than exiting.
func TestAcceptErrorsDoNotStopRelay(t *testing.T) {
	s, u := startRelay(t, Config{}, func(ln net.Listener) net.Listener { return &failingListener{Listener: ln, fails: 3} })
	pairRaw(t, s, u, newDevices(t), nil, nil)
}

// TestHTTPKeepAliveClosed: a plain HTTP request that is not an upgrade gets its answer and
// the connection closes, instead of idling in keep-alive with no deadline.
func TestHTTPKeepAliveClosed(t *testing.T) {
	s, u := startRelay(t, Config{}, nil)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: relay\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("connection not closed after the answer: %v (read %q)", err, got)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 404") {
		t.Errorf("answer %q, want a 404", got)
	}
	for deadline := time.Now().Add(5 * time.Second); s.Stats().Open != 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := s.Stats().Open; n != 0 {
		t.Errorf("%d connections still open at the relay", n)
	}
}
