package relay

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/transport"
)

// Defaults of Config; a zero field takes them.
const (
	DefaultMaxSessions    = 1000
	DefaultMaxPending     = 4000
	DefaultMaxConnsPerIP  = 64
	DefaultMaxConns       = 10000
	DefaultJoinTimeout    = 10 * time.Second
	DefaultPendingTimeout = 5 * time.Minute
	DefaultIdleTimeout    = 10 * time.Minute
)

// Config is a relay's identity and limits.
type Config struct {
	// Identity is the relay's own; devices pin its ID from the relay URL.
	Identity *identity.Identity
	// Token, if set, is the access token every join must carry (a private relay).
	Token string
	// MaxSessions caps paired sessions; a join past it is refused with CodeFull.
	MaxSessions int
	// MaxPending caps joins waiting for their partner; past it, CodeFull.
	MaxPending int
	// MaxConnsPerIP caps connections of any state from one source address (an IPv6 /64);
	// past it the relay aborts the TLS handshake at the ClientHello.
	MaxConnsPerIP int
	// MaxConns caps connections of any state; past it they are closed at once.
	MaxConns int
	// SessionRate and GlobalRate cap the bytes per second of one session (both directions
	// together) and of the whole relay; zero is unlimited.
	SessionRate rate.Limit
	GlobalRate  rate.Limit
	// JoinTimeout bounds the time from connect to a complete join (TLS handshake included).
	JoinTimeout time.Duration
	// PendingTimeout bounds how long a join waits for its partner (CodeTimeout).
	PendingTimeout time.Duration
	// IdleTimeout ends a session through which no byte moved for that long.
	IdleTimeout time.Duration
	// Log gets the relay's events. It never gets device IDs or rendezvous IDs.
	Log *slog.Logger
}

func (c *Config) fill() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxSessions, DefaultMaxSessions)
	def(&c.MaxPending, DefaultMaxPending)
	def(&c.MaxConnsPerIP, DefaultMaxConnsPerIP)
	def(&c.MaxConns, DefaultMaxConns)
	dur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	dur(&c.JoinTimeout, DefaultJoinTimeout)
	dur(&c.PendingTimeout, DefaultPendingTimeout)
	dur(&c.IdleTimeout, DefaultIdleTimeout)
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// Server is a relay.
type Server struct {
	cfg     Config
	tls     *tls.Config
	refuse  *tls.Config // aborts a handshake at the ClientHello (per-address cap)
	global  *rate.Limiter
	stats   stats
	http    *http.Server
	httpIn  *chanListener
	closing chan struct{}

	mu struct {
		sync.Mutex
		closed    bool
		pending   [3]map[ID]*waiter // by Role
		npending  int
		sessions  int
		perIP     map[netip.Prefix]int // by sourceOf
		conns     map[*trackedConn]struct{}
		listeners []net.Listener
	}
	wg sync.WaitGroup
}

// New returns a relay with cfg; serve it with Serve.
func New(cfg Config) (*Server, error) {
	if cfg.Identity == nil {
		return nil, errors.New("relay: no identity")
	}
	if len(cfg.Token) > MaxTokenLen {
		return nil, fmt.Errorf("relay: access token longer than %d bytes", MaxTokenLen)
	}
	cfg.fill()
	s := &Server{cfg: cfg, closing: make(chan struct{})}
	s.tls = &tls.Config{
		MinVersion:       tls.VersionTLS13,
		MaxVersion:       tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{transport.KeyExchange},
		Certificates:     []tls.Certificate{cfg.Identity.Cert},
		NextProtos:       []string{ALPN, alpnHTTP},
		// No NewSessionTicket after the handshake: nothing but the reply may follow it.
		SessionTicketsDisabled: true,
	}
	s.refuse = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return nil, errors.New("too many connections from this address")
	}}
	if cfg.GlobalRate > 0 {
		s.global = rate.NewLimiter(cfg.GlobalRate, burst(cfg.GlobalRate))
	}
	for r := range s.mu.pending {
		s.mu.pending[r] = make(map[ID]*waiter)
	}
	s.mu.perIP = make(map[netip.Prefix]int)
	s.mu.conns = make(map[*trackedConn]struct{})
	s.httpIn = newChanListener()
	mux := http.NewServeMux()
	mux.HandleFunc(WebSocketPath, s.serveWebSocket)
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: cfg.JoinTimeout, ReadTimeout: cfg.JoinTimeout,
		ErrorLog: slog.NewLogLogger(cfg.Log.Handler(), slog.LevelDebug)}
	// One request per connection: an idle keep-alive connection would hold its place under
	// the caps with no deadline. (ReadTimeout does not reach a hijacked WebSocket: the join
	// deadline in handleTLS replaces it.)
	s.http.SetKeepAlivesEnabled(false)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.http.Serve(s.httpIn)
	}()
	return s, nil
}

// ID is the relay's device ID, the one its URL pins.
func (s *Server) ID() identity.DeviceID { return s.cfg.Identity.ID }

// Serve accepts connections on ln until Close; it returns nil after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.mu.listeners = append(s.mu.listeners, ln)
	s.mu.Unlock()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case <-s.closing:
				return nil
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("relay: accepting on %s: %w", ln.Addr(), err)
			}
			// Out of file descriptors (EMFILE, ENFILE) or buffers under a flood: wait for
			// connections to end instead of exiting, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.cfg.Log.Warn("relay: accepting failed; retrying", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.closing:
				return nil
			}
			continue
		}
		backoff = 0
		tc, over := s.track(c)
		if tc == nil {
			s.stats.refused(refusedConnCap)
			c.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer tc.Close()
			s.handleConn(tc, over)
		}()
	}
}

// Close stops accepting, refuses waiting joins and ends every session.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	close(s.closing)
	for _, ln := range s.mu.listeners {
		ln.Close()
	}
	for c := range s.mu.conns {
		c.Conn.Close()
	}
	s.mu.Unlock()
	s.httpIn.Close()
	s.http.Close()
	s.wg.Wait()
	return nil
}

// track counts c against the caps. It returns nil when the relay is at MaxConns, and over
// when c's address is past MaxConnsPerIP.
func (s *Server) track(c net.Conn) (tc *trackedConn, over bool) {
	ip := sourceOf(addrOf(c.RemoteAddr()).Addr())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed || len(s.mu.conns) >= s.cfg.MaxConns {
		return nil, false
	}
	over = s.mu.perIP[ip] >= s.cfg.MaxConnsPerIP
	tc = &trackedConn{Conn: c}
	s.mu.perIP[ip]++
	s.mu.conns[tc] = struct{}{}
	tc.release = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.mu.perIP[ip]--; s.mu.perIP[ip] <= 0 {
			delete(s.mu.perIP, ip)
		}
		delete(s.mu.conns, tc)
	}
	return tc, over
}

// handleConn sniffs the first byte: a TLS handshake record (0x16) is a device's relay
// connection or a WebSocket inside TLS; a letter is a plain HTTP request (a WebSocket upgrade
// behind a TLS-terminating proxy); anything else is dropped.
func (s *Server) handleConn(c *trackedConn, overIP bool) {
	c.SetDeadline(time.Now().Add(s.cfg.JoinTimeout))
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		s.stats.conn(kindOther)
		return
	}
	pc := &prefixConn{Conn: c, prefix: first[:]}
	switch {
	case first[0] == 0x16:
		if overIP {
			s.stats.conn(kindTLS)
			s.stats.refused(refusedPerIP)
			s.cfg.Log.Debug("relay: refused a connection: too many from its address")
			tls.Server(pc, s.refuse).Handshake()
			return
		}
		// The connection under the tracking wrapper is what gets spliced.
		s.handleTLS(pc, c.Conn, addrOf(c.RemoteAddr()), kindTLS)
	case first[0] >= 'A' && first[0] <= 'Z':
		s.stats.conn(kindWebSocket)
		if overIP {
			s.stats.refused(refusedPerIP)
			return
		}
		s.serveHTTP(pc)
	default:
		s.stats.conn(kindOther)
	}
}

// serveHTTP hands c to the HTTP server and waits until it is done with it.
func (s *Server) serveHTTP(c net.Conn) {
	done := make(chan struct{})
	hc := &closeNotifyConn{Conn: c, done: done}
	// The HTTP server bounds the request header (ReadHeaderTimeout); a WebSocket's join
	// has its own deadline inside.
	c.SetDeadline(time.Time{})
	if !s.httpIn.put(hc) {
		return
	}
	select {
	case <-done:
	case <-s.closing:
	}
}

// handleTLS runs the relay's TLS on stream. raw is the TCP connection under stream when
// there is one (spliced after the join), nil for a WebSocket.
func (s *Server) handleTLS(stream net.Conn, raw net.Conn, observed netip.AddrPort, kind connKind) {
	// The handshake and the join within JoinTimeout (for a WebSocket, from the upgrade).
	stream.SetDeadline(time.Now().Add(s.cfg.JoinTimeout))
	rc := &recordConn{Conn: stream}
	tc := tls.Server(rc, s.tls)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.JoinTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		s.stats.conn(kind)
		s.cfg.Log.Debug("relay: handshake failed", "err", err)
		return
	}
	if tc.ConnectionState().NegotiatedProtocol != ALPN && raw != nil {
		// A WebSocket inside TLS (ALPN http/1.1, or none: HTTP clients may not offer
		// it), for networks that pass only HTTPS: the HTTP server reads
		// whole records from here on.
		s.stats.conn(kindWebSocket)
		rc.passthrough = true
		s.serveHTTP(tc)
		return
	}
	s.stats.conn(kind)
	if tc.ConnectionState().NegotiatedProtocol != ALPN {
		return
	}
	j, err := readJoin(tc)
	if err != nil {
		s.stats.refused(refusedBadJoin)
		s.sendReply(tc, &reply{Code: CodeBadJoin, Message: err.Error()})
		return
	}
	if s.cfg.Token != "" && !tokenMatches(j.Token, s.cfg.Token) {
		s.stats.refused(refusedToken)
		msg := "this relay needs an access token"
		if j.Token != "" {
			msg = "wrong access token"
		}
		s.sendReply(tc, &reply{Code: CodeToken, Message: msg})
		return
	}
	stream.SetDeadline(time.Time{})
	w := &waiter{role: j.Role, ids: j.IDs, tls: tc, stream: stream, raw: raw, observed: observed,
		done: make(chan pairing, 1), writable: make(chan struct{}), readDone: make(chan error, 1)}
	// The device sends nothing more until its close_notify; a read that ends before the
	// pairing means it went away.
	go func() {
		var b [1]byte
		_, err := tc.Read(b[:])
		if err == nil {
			err = errors.New("device sent data before its close_notify")
		} else if err == io.EOF {
			err = nil
		}
		w.readDone <- err
	}()
	s.rendezvous(w)
}

// tokenMatches compares in constant time, over hashes so that not even the token's length
// shows in the timing.
func tokenMatches(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// sendReply sends a refusal and closes tc. The log line names the reason only: no address,
// no rendezvous ID.
func (s *Server) sendReply(tc *tls.Conn, r *reply) {
	s.cfg.Log.Debug("relay: refused a join", "code", int(r.Code), "reason", r.Message)
	tc.SetWriteDeadline(time.Now().Add(s.cfg.JoinTimeout))
	tc.Write(r.encode())
	tc.Close()
}

// sourceOf is what MaxConnsPerIP counts by: an IPv4 address, or an IPv6 /64, since one
// IPv6 host usually holds a whole /64 and could otherwise take a new address per connection.
func sourceOf(ip netip.Addr) netip.Prefix {
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32)
	}
	p, _ := ip.Prefix(64)
	return p
}

// addrOf is a connection address as a netip.AddrPort (IPv4 unmapped).
func addrOf(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// trackedConn releases its place in the caps once, when closed.
type trackedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// closeNotifyConn closes done when closed.
type closeNotifyConn struct {
	net.Conn
	once sync.Once
	done chan struct{}
}

func (c *closeNotifyConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.done) })
	return err
}

// chanListener is a net.Listener fed by put: it hands sniffed connections to the HTTP server.
type chanListener struct {
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *chanListener) put(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.closed:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{} }
