package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/transport"
)

// Accept limits. A handshake in progress holds a socket, a goroutine and crypto/tls's buffers
// until it ends or transport.DefaultHandshakeTimeout (10 s) passes; these caps bound what
// strangers can make the daemon hold, whatever they send.
const (
	// maxHandshakes bounds handshakes in progress at once. A peer's handshake takes a few
	// round trips (about 2 ms on loopback, ML-KEM and Ed25519 included), so even dozens of
	// peers reconnecting together after a network change fit; 64 of them hold at most a few
	// MB.
	maxHandshakes = 64
	// maxHandshakesPerSource bounds handshakes in progress from one source (an IPv4 address
	// or an IPv6 /64, which one host can fill at will). A device opens one link to a peer at a
	// time, two when both dial at once or while a link is replaced, and a foreground mount
	// adds one more; 8 leaves room for a few devices behind one NAT reconnecting together,
	// and keeps one source to an eighth of maxHandshakes.
	maxHandshakesPerSource = 8
	// maxHandshakesPerRelay bounds handshakes in progress on streams paired at one relay,
	// which all come from the relay's address: every peer that reaches this device through
	// that relay shares it, so the per-source cap would let 8 of them link at once (all of
	// them reconnect together when the relay restarts). A stream reaches us only through a
	// join that named one of our rendezvous IDs, which a stranger cannot compute, or a
	// pairing code's; half of maxHandshakes leaves the other half to direct connections.
	maxHandshakesPerRelay = maxHandshakes / 2
	// acceptBackoffMin and acceptBackoffMax pace retries after a failed Accept (EMFILE,
	// ENFILE, ECONNABORTED, ...), as net/http's Server.Serve does: the error usually clears
	// when connections close, and returning would stop incoming links until a restart.
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
	// refusalLogEvery is the most often refused connections are logged: a stranger can open
	// them as fast as it likes, and one line each would flood the log.
	refusalLogEvery = 10 * time.Second
)

// acceptLoop accepts connections until the listener closes, handing each to its own
// handshake goroutine within the handshake caps. A failed Accept is retried with backoff.
func (n *Node) acceptLoop(ctx context.Context) {
	backoff := time.Duration(0)
	for {
		raw, err := n.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			n.refused.note("accept failed", "", err)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		backoff = 0
		n.serveIncoming(ctx, raw, linkPath{kind: api.PathDirect})
	}
}

// serveIncoming runs the accepting side of a link on raw, a connection a peer opened to us
// (accepted on the listener, or paired at a relay), within the handshake caps: its
// handshake in a goroutine of its own, then attach.
func (n *Node) serveIncoming(ctx context.Context, raw net.Conn, how linkPath) {
	setDeadPathTimeout(raw)
	hctx, cancel := context.WithCancel(ctx)
	h := &handshake{src: handshakeSource{addr: sourceOf(raw.RemoteAddr())}, from: raw.RemoteAddr().String(), cancel: cancel, start: time.Now()}
	if how.relayed() {
		// Counted per relay, not by the relay's address (maxHandshakesPerRelay).
		h.src = handshakeSource{relay: how.via}
	}
	evicted, reason := n.gate.enter(h)
	if reason != "" {
		cancel()
		raw.Close()
		n.refused.note(reason, h.from, nil)
		return
	}
	if evicted != nil {
		evicted.cancel()
		n.refused.note(fmt.Sprintf("idle handshake closed for a new one (all %d in progress)", maxHandshakes), evicted.from, nil)
	}
	go func() {
		defer cancel()
		defer n.gate.leave(h)
		conn, err := transport.Server(context.WithValue(hctx, handshakeKey{}, h), raw, n.tcfg)
		if err != nil {
			if ctx.Err() == nil {
				n.refused.note("handshake failed", raw.RemoteAddr().String(), err)
			}
			return
		}
		if conn.Provisional { // a pairing (pair.go); never a trusted peer's link
			n.acceptPairing(ctx, conn, how)
			return
		}
		n.attachVia(conn, how)
	}()
}

// sourceOf is the unit the per-source cap counts: the IPv4 address, or the IPv6 /64.
func sourceOf(a net.Addr) netip.Prefix {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Prefix{}
	}
	ip := ap.Addr().Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// handshakeSource is what a per-source cap counts: the source address of a connection
// accepted on the listener, or the relay a stream was paired at.
type handshakeSource struct {
	addr  netip.Prefix
	relay string // the relay's URL without its token; "" for the listener
}

// limit is the cap of handshakes in progress from s.
func (s handshakeSource) limit() int {
	if s.relay != "" {
		return maxHandshakesPerRelay
	}
	return maxHandshakesPerSource
}

// handshake is one handshake in progress.
type handshake struct {
	src      handshakeSource
	from     string // remote address, for the log
	start    time.Time
	cancel   context.CancelFunc // aborts the handshake
	admitted atomic.Bool        // its ClientHello carried a trusted peer's hello tag
	gone     bool               // counted out (left or evicted); guarded by handshakeGate.mu
}

// handshakeKey carries the *handshake in the handshake's context, for admitted.
type handshakeKey struct{}

// admitted marks the handshake of hello as a peer's (transport.Config.Admitted).
func admitted(hello *tls.ClientHelloInfo) {
	if h, ok := hello.Context().Value(handshakeKey{}).(*handshake); ok {
		h.admitted.Store(true)
	}
}

// handshakeGate counts handshakes in progress, in all and by source (an address, or a relay).
//
// When all maxHandshakes slots are taken, a new connection takes the slot of the oldest
// handshake whose ClientHello has not been admitted: strangers' idle connections from many
// addresses would otherwise hold every slot until their 10 s timeout, over and over, and keep
// trusted peers out. A peer's ClientHello follows its TCP handshake at once and is admitted
// then, after which its handshake cannot be evicted.
type handshakeGate struct {
	mu       sync.Mutex
	inFlight map[*handshake]struct{}
	bySource map[handshakeSource]int
}

// enter admits h, or returns why not. It may return a handshake evicted to make room, which
// the caller aborts.
func (g *handshakeGate) enter(h *handshake) (evicted *handshake, refused string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inFlight == nil {
		g.inFlight = map[*handshake]struct{}{}
		g.bySource = map[handshakeSource]int{}
	}
	if g.bySource[h.src] >= h.src.limit() {
		if h.src.relay != "" {
			return nil, fmt.Sprintf("over %d handshakes in progress through one relay", maxHandshakesPerRelay)
		}
		return nil, fmt.Sprintf("over %d handshakes in progress from one address", maxHandshakesPerSource)
	}
	if len(g.inFlight) >= maxHandshakes {
		for o := range g.inFlight {
			if !o.admitted.Load() && (evicted == nil || o.start.Before(evicted.start)) {
				evicted = o
			}
		}
		if evicted == nil {
			return nil, fmt.Sprintf("over %d handshakes in progress", maxHandshakes)
		}
		g.removeLocked(evicted)
	}
	g.inFlight[h] = struct{}{}
	g.bySource[h.src]++
	return evicted, ""
}

// leave counts h out when its handshake is over; it does nothing for an evicted one.
func (g *handshakeGate) leave(h *handshake) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removeLocked(h)
}

func (g *handshakeGate) removeLocked(h *handshake) {
	if h.gone {
		return
	}
	h.gone = true
	delete(g.inFlight, h)
	if g.bySource[h.src]--; g.bySource[h.src] <= 0 {
		delete(g.bySource, h.src)
	}
}

// refusalLog logs refused connections at a bounded rate: the first one after a quiet
// period at once, with its details; those that follow within refusalLogEvery as one summary
// line with a count per reason and the last example.
type refusalLog struct {
	log   *slog.Logger
	every time.Duration

	mu      sync.Mutex
	last    time.Time      // when a line was last written
	counts  map[string]int // refusals since then, by reason
	example string         // the last of them
	pending *time.Timer    // writes the summary; nil when none is due
}

func newRefusalLog(log *slog.Logger) *refusalLog {
	return &refusalLog{log: log, every: refusalLogEvery, counts: map[string]int{}}
}

// note records one refused connection (or failed Accept); from is the remote address, err
// the detail, either may be empty.
func (r *refusalLog) note(reason, from string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.pending == nil && now.Sub(r.last) >= r.every {
		r.last = now
		args := []any{"reason", reason}
		if from != "" {
			args = append(args, "from", from)
		}
		if err != nil {
			args = append(args, "err", err)
		}
		r.log.Warn("refused incoming connection", args...)
		return
	}
	r.counts[reason]++
	r.example = reason
	if from != "" {
		r.example += " from " + from
	}
	if err != nil {
		r.example += ": " + err.Error()
	}
	if r.pending == nil {
		r.pending = time.AfterFunc(r.last.Add(r.every).Sub(now), r.flush)
	}
}

// flush writes the summary of the refusals since the last line.
func (r *refusalLog) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = nil
	if len(r.counts) == 0 {
		return
	}
	total := 0
	reasons := make([]string, 0, len(r.counts))
	for reason, c := range r.counts {
		total += c
		reasons = append(reasons, fmt.Sprintf("%s: %d", reason, c))
	}
	sort.Strings(reasons)
	r.log.Warn("refused incoming connections", "count", total, "since", r.last.Format(time.RFC3339),
		"by_reason", strings.Join(reasons, "; "), "last", r.example)
	r.last = time.Now()
	clear(r.counts)
}

// stop writes a pending summary now (the node is stopping).
func (r *refusalLog) stop() {
	r.mu.Lock()
	if r.pending != nil {
		r.pending.Stop()
	}
	r.mu.Unlock()
	r.flush()
}
