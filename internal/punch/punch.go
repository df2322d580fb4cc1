// Package punch opens direct TCP connections through NATs by simultaneous open: two devices,
// each behind a router that lets in only what answers its own traffic, connect to each
// other's public address at the same moment, from the port they listen on. Each one's SYN
// opens its own router for the other's, and the two SYNs cross into one connection (RFC 793
// simultaneous open; RFC 5382 calls the routers' behaviour "endpoint-independent mapping").
// Its job is that TCP connection, nothing above it: the caller runs TLS on it (IsTLSClient
// says which side is the client), carries the messages that coordinate an attempt (msg.go)
// over a link it already has (a relayed one), and decides when to try.
//
// A punch goes like this (docs/PROTOCOL.md, "Punch messages"):
//
//  1. Each device listens with Listen, on the port it also accepts links on; the socket
//     allows a second socket bound to the same port (SO_REUSEADDR, SO_REUSEPORT on Unix).
//  2. Each learns its public address as a relay sees it, best by reaching the relay from
//     that same port (Listener.DialContext as relay.Options.DialContext), so that the
//     mapping it learns is the one the punch will use.
//  3. Over the existing link they exchange CANDIDATES; the side that opened the attempt
//     sends START, waits half the link's round-trip time, and calls Punch; the other side
//     calls Punch as START arrives. Both SYNs then leave at about the same moment.
//  4. Punch connects from the listening port to the peer's address again and again until
//     ctx ends. A connection the listener accepts from that address in the meantime counts
//     too: on some stacks, and when one side's SYN arrives between two of its own
//     attempts, that side sees an accept instead of a connect.
//
// Against a router that maps every connection to a new port (a symmetric NAT) the address
// learned at the relay is wrong for the punch, and Punch fails with ErrNoPath when ctx ends:
// the devices stay on the relay.
package punch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
)

// Tuning constants.
const (
	// DefaultAttemptTimeout bounds one connect: long enough for the kernel's first SYN
	// retransmission (its initial RTO is 1 s, RFC 6298), after which a new attempt sends a
	// fresh SYN at once instead of waiting 2 s more.
	DefaultAttemptTimeout = 1500 * time.Millisecond
	// DefaultRetryInterval is the pause after a connect that failed at once (a reset from
	// the peer's host before its socket exists, or the 4-tuple still in use).
	DefaultRetryInterval = 50 * time.Millisecond
	// acceptQueue is how many accepted connections wait for Accept; past it new ones are
	// closed.
	acceptQueue = 64
)

var (
	// ErrNoPath means no connection opened before ctx ended: one of the routers maps
	// each connection to a new port, or drops everything from outside.
	ErrNoPath = errors.New("no direct path opened")
	// ErrBusy means a punch to the same address from this listener is already running.
	ErrBusy = errors.New("a punch to this address is already running")
)

// Options tune Punch; nil takes the defaults.
type Options struct {
	AttemptTimeout time.Duration // one connect; zero is DefaultAttemptTimeout
	RetryInterval  time.Duration // after a failed connect; zero is DefaultRetryInterval
}

// Result is an opened connection.
type Result struct {
	Conn net.Conn
	// Accepted: the connection came in on the listener rather than from our connect.
	Accepted bool
	// Attempts is how many connects were started.
	Attempts int
	// Elapsed is from the call of Punch to the connection.
	Elapsed time.Duration
}

// Listener is a TCP listener whose port connects can also be bound to. Accept returns the
// connections no punch claimed; call it continuously (a server does), or unclaimed
// connections fill its queue and accepting stops.
type Listener struct {
	ln    *net.TCPListener
	local *net.TCPAddr  // for binding connects: the listener's address and port
	ready chan struct{} // a token when the queue has connections or accepting ended
	wg    sync.WaitGroup

	mu struct {
		sync.Mutex
		queue  []net.Conn                       // accepted, unclaimed, for Accept
		claims map[netip.AddrPort]chan net.Conn // by the remote address a punch waits for
		err    error                            // why accepting ended
	}
}

// Listen listens on address ("host:port"; port 0 picks one) so that punches can connect
// from the same port.
func Listen(ctx context.Context, address string) (*Listener, error) {
	lc := net.ListenConfig{Control: reusePort}
	ln, err := lc.Listen(ctx, "tcp", address)
	if err != nil {
		return nil, fmt.Errorf("listen on %s for direct paths: %w", address, err)
	}
	tl := ln.(*net.TCPListener)
	a := tl.Addr().(*net.TCPAddr)
	local := &net.TCPAddr{IP: a.IP, Port: a.Port}
	if local.IP.IsUnspecified() {
		local.IP = nil // let each connect pick the address of its route
	}
	l := &Listener{ln: tl, local: local, ready: make(chan struct{}, 1)}
	l.mu.claims = make(map[netip.AddrPort]chan net.Conn)
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// Addr is the listening address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Port is the listening port, the one punches connect from.
func (l *Listener) Port() uint16 { return uint16(l.local.Port) }

// Accept returns the next connection no punch claimed.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		if len(l.mu.queue) > 0 {
			c := l.mu.queue[0]
			l.mu.queue = l.mu.queue[1:]
			more := len(l.mu.queue) > 0
			l.mu.Unlock()
			if more {
				l.signal()
			}
			return c, nil
		}
		err := l.mu.err
		l.mu.Unlock()
		if err != nil {
			l.signal() // for other callers of Accept
			return nil, err
		}
		<-l.ready
	}
}

func (l *Listener) signal() {
	select {
	case l.ready <- struct{}{}:
	default:
	}
}

// Close stops listening and closes the connections nobody took; punches in progress go on
// connecting, but claim nothing more.
func (l *Listener) Close() error {
	err := l.ln.Close()
	l.wg.Wait()
	l.mu.Lock()
	queue := l.mu.queue
	l.mu.queue = nil
	l.mu.Unlock()
	for _, c := range queue {
		c.Close()
	}
	return err
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				l.mu.Lock()
				l.mu.err = err
				l.mu.Unlock()
				l.signal()
				return
			}
			// Out of descriptors or buffers: wait for some to free, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if l.claimed(c) {
			continue
		}
		l.mu.Lock()
		full := len(l.mu.queue) >= acceptQueue
		if !full {
			l.mu.queue = append(l.mu.queue, c)
		}
		l.mu.Unlock()
		if full {
			// Nobody calls Accept: drop, as a full backlog does.
			c.Close()
			continue
		}
		l.signal()
	}
}

// claimed hands c to the punch waiting for its remote address, if any.
func (l *Listener) claimed(c net.Conn) bool {
	remote := addrPortOf(c.RemoteAddr())
	l.mu.Lock()
	defer l.mu.Unlock()
	ch, ok := l.mu.claims[remote]
	if !ok {
		return false
	}
	delete(l.mu.claims, remote)
	ch <- c // buffered, and only ever sent once
	return true
}

// DialContext connects from the listening port, like net.Dialer.DialContext: give it to
// relay.Options.DialContext so that the address the relay observes is the public mapping of
// that port, the one a punch will use.
func (l *Listener) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: l.local, Control: reusePort}
	return d.DialContext(ctx, network, address)
}

// Punch connects from the listening port to remote until a connection opens or ctx ends;
// a connection that the listener accepts from remote meanwhile is returned too. Both devices
// must punch each other at about the same moment (see the package comment). The error when
// ctx ends wraps ErrNoPath.
func (l *Listener) Punch(ctx context.Context, remote netip.AddrPort, opts *Options) (*Result, error) {
	start := time.Now()
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	if !remote.IsValid() || remote.Port() == 0 {
		return nil, fmt.Errorf("punch: invalid peer address %s", remote)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}

	claim := make(chan net.Conn, 1)
	l.mu.Lock()
	if _, busy := l.mu.claims[remote]; busy {
		l.mu.Unlock()
		return nil, fmt.Errorf("punch to %s: %w", remote, ErrBusy)
	}
	// The peer's connect may have come in before this call (no router in front of us
	// held it back) and still wait for Accept: it is the connection.
	for i, c := range l.mu.queue {
		if addrPortOf(c.RemoteAddr()) == remote {
			l.mu.queue = slices.Delete(l.mu.queue, i, i+1)
			l.mu.Unlock()
			return &Result{Conn: c, Accepted: true, Elapsed: time.Since(start)}, nil
		}
	}
	l.mu.claims[remote] = claim
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		if l.mu.claims[remote] == claim {
			delete(l.mu.claims, remote)
		}
		l.mu.Unlock()
	}()

	dctx, stop := context.WithCancel(ctx)
	defer stop()
	type dialed struct {
		conn     net.Conn
		attempts int
		last     error
	}
	out := make(chan dialed, 1)
	go func() {
		attempts, last := 0, error(nil)
		for dctx.Err() == nil {
			attempts++
			actx, cancel := context.WithTimeout(dctx, o.AttemptTimeout)
			c, err := l.DialContext(actx, "tcp", remote.String())
			cancel()
			if err == nil {
				out <- dialed{c, attempts, nil}
				return
			}
			if dctx.Err() == nil {
				last = err
			}
			if errors.Is(err, context.DeadlineExceeded) && dctx.Err() == nil {
				continue // the SYN went unanswered: send a fresh one now
			}
			select {
			case <-time.After(o.RetryInterval):
			case <-dctx.Done():
			}
		}
		out <- dialed{nil, attempts, last}
	}()

	select {
	case d := <-out:
		if d.conn != nil {
			return &Result{Conn: d.conn, Attempts: d.attempts, Elapsed: time.Since(start)}, nil
		}
		// ctx ended; a connection accepted just before still counts.
		select {
		case c := <-claim:
			return &Result{Conn: c, Accepted: true, Attempts: d.attempts, Elapsed: time.Since(start)}, nil
		default:
		}
		return nil, fmt.Errorf("punch from port %d to %s: %w in %v after %d connects (last: %v): "+
			"a router on the way gives each connection a new port or lets nothing in; the relay stays the path",
			l.local.Port, remote, ErrNoPath, time.Since(start).Round(time.Millisecond), d.attempts, explain(d.last))
	case c := <-claim:
		stop()
		d := <-out
		if d.conn != nil {
			// Cannot happen for one 4-tuple, but two connections must not both live.
			d.conn.Close()
		}
		return &Result{Conn: c, Accepted: true, Attempts: d.attempts, Elapsed: time.Since(start)}, nil
	}
}

// explain names the usual cause of a failed connect.
func explain(err error) error {
	switch {
	case err == nil:
		return errors.New("none")
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no answer to the SYN: %w", err)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Errorf("a connection between these two ports exists already (taken by Accept as an ordinary link, or closing): %w", err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("the peer's side refused (it was not punching yet, or not on that port): %w", err)
	}
	return err
}

// IsTLSClient says whether self runs the TLS client on a punched connection to peer: the
// device with the smaller ID, whichever side connected or accepted, so the two never both
// wait for a ClientHello.
func IsTLSClient(self, peer identity.DeviceID) bool {
	return bytes.Compare(self[:], peer[:]) < 0
}

func addrPortOf(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
