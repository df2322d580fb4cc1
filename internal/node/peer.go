package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/transport"
)

// peer is one trusted device and its link.
type peer struct {
	n *Node

	mu        sync.Mutex
	cfg       config.Peer
	sess      *rpc.Session    // the link our calls use
	conn      *transport.Conn // sess's connection
	extra     []link          // other live links the peer opened; they serve its requests
	since     time.Time
	lastErr   error
	lastAddr  string
	changed   chan struct{} // closed and replaced whenever sess changes
	attempted chan struct{} // closed and replaced after every failed dial
	kick      chan struct{} // capacity 1: dial now
	dialStop  context.CancelFunc
	dialDone  chan struct{}
	lan       []lanAddr // where LAN discovery found the peer (candidates.go)
	transfers map[string]*api.TransferStatus
	links     int // links negotiating or live, at most maxLinksPerPeer (attach)
	uses      map[*rpc.Session]*linkUse
	rekeys    int // links we replaced to renew their keys (rekey.go)
	// pastIn and pastOut are the traffic of links that ended while another stayed up.
	pastIn, pastOut uint64
}

// link is one established connection to the peer.
type link struct {
	sess *rpc.Session
	conn *transport.Conn
}

func newPeer(n *Node, cfg config.Peer) *peer {
	return &peer{n: n, cfg: cfg, changed: make(chan struct{}), attempted: make(chan struct{}), kick: make(chan struct{}, 1),
		transfers: map[string]*api.TransferStatus{}, uses: map[*rpc.Session]*linkUse{}}
}

func (p *peer) name() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.Name
}

func (p *peer) addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.Addr
}

// reserveLink counts one more link, unless the peer already holds maxLinksPerPeer.
func (p *peer) reserveLink() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.links >= maxLinksPerPeer {
		return false
	}
	p.links++
	return true
}

// releaseLink uncounts a link that failed to negotiate or ended.
func (p *peer) releaseLink() {
	p.mu.Lock()
	p.links--
	p.mu.Unlock()
}

// setConfig updates the peer's config and reports whether its address changed.
func (p *peer) setConfig(cfg config.Peer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := cfg.Addr != p.cfg.Addr
	p.cfg = cfg
	return changed
}

func (p *peer) setError(err error) {
	p.mu.Lock()
	p.lastErr = err
	close(p.attempted)
	p.attempted = make(chan struct{})
	p.mu.Unlock()
}

// refusal reports whether err means the two devices do not trust each other (or the address
// belongs to another device): waiting longer will not help.
func refusal(err error) bool {
	return errors.Is(err, transport.ErrRefusedByPeer) || errors.Is(err, transport.ErrUntrusted) ||
		errors.Is(err, transport.ErrWrongPeer) || errors.Is(err, transport.ErrNoPQ)
}

// setSession adds a new link and reports whether it became the one our calls use.
//
// Usually a device has one link to a peer; two happen when both dialled at once, or when
// the peer runs a second process under the same identity (a foreground mount beside its
// daemon), or when the peer reconnected before its old link was seen dead. The rules:
//   - a live link is replaced by a newer one that is preferred (opened by the smaller
//     device ID) or that, like it, the peer opened (the peer's newest process or link);
//   - the link that loses is closed if we opened it, since only we use it; one the peer
//     opened is kept serving its requests (in extra) until the peer closes it, since
//     only the peer knows whether a process of it still uses it.
//
// Both sides apply the same preference, so a simultaneous dial ends with one link: the
// side that opened the losing link closes it.
func (p *peer) setSession(sess *rpc.Session, conn *transport.Conn, preferred bool) bool {
	p.mu.Lock()
	old, oldConn := p.sess, p.conn
	if old != nil && old.Err() == nil && !preferred && (conn.Outbound || oldConn.Outbound) {
		if !conn.Outbound {
			p.extra = append(p.extra, link{sess, conn})
		}
		p.mu.Unlock()
		return false
	}
	p.sess, p.conn, p.since, p.lastErr = sess, conn, time.Now(), nil
	p.lastAddr = conn.RemoteAddr().String()
	close(p.changed)
	p.changed = make(chan struct{})
	keepOld := old != nil && old.Err() == nil && !oldConn.Outbound
	if keepOld {
		p.extra = append(p.extra, link{old, oldConn})
	}
	p.mu.Unlock()
	if old != nil && !keepOld {
		old.Close(errors.New("replaced by a newer link"))
	}
	return true
}

// replaceSession makes sess, a link we dialled to replace old, the one our calls use, and
// keeps old serving (in extra) until it drains. It fails if old is no longer that link.
func (p *peer) replaceSession(sess *rpc.Session, conn *transport.Conn, old *rpc.Session) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess != old || old.Err() != nil {
		return false
	}
	p.extra = append(p.extra, link{old, p.conn})
	p.sess, p.conn, p.lastErr = sess, conn, nil
	p.lastAddr = conn.RemoteAddr().String()
	close(p.changed)
	p.changed = make(chan struct{})
	return true
}

// keepTraffic is called when sess has ended: if another link is up, sess's traffic is kept
// in the peer's totals (status shows the traffic since the peer connected, across rekeys)
// and it reports true; otherwise the totals start again.
func (p *peer) keepTraffic(sess *rpc.Session) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess == nil || p.sess.Err() != nil {
		p.pastIn, p.pastOut = 0, 0
		return false
	}
	p.pastIn += sess.BytesIn()
	p.pastOut += sess.BytesOut()
	return true
}

func (p *peer) addUse(sess *rpc.Session, use *linkUse) {
	p.mu.Lock()
	p.uses[sess] = use
	p.mu.Unlock()
}

func (p *peer) dropUse(sess *rpc.Session) {
	p.mu.Lock()
	delete(p.uses, sess)
	p.mu.Unlock()
}

// acquire is session for a caller that runs calls or a transfer on the link: the link is
// not closed for a rekey (rekey.go) until use.done is called, once. use may be nil (a link
// that ended meanwhile); done accepts that.
func (p *peer) acquire(ctx context.Context, wait time.Duration) (*rpc.Session, *linkUse, error) {
	sess, err := p.session(ctx, wait)
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	use := p.uses[sess]
	p.mu.Unlock()
	if use != nil {
		use.active.Add(1)
	}
	return sess, use, nil
}

// clearSession forgets an ended link. If it was the one our calls used, the newest live
// link the peer opened takes its place.
func (p *peer) clearSession(sess *rpc.Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.extra = slices.DeleteFunc(p.extra, func(l link) bool { return l.sess == sess || l.sess.Err() != nil })
	if p.sess != sess {
		return
	}
	p.sess, p.conn = nil, nil
	p.lastErr = sess.Err()
	if n := len(p.extra); n > 0 {
		l := p.extra[n-1]
		p.extra = p.extra[:n-1]
		p.sess, p.conn, p.since, p.lastErr = l.sess, l.conn, time.Now(), nil
		p.lastAddr = l.conn.RemoteAddr().String()
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// session returns the live link, waiting up to wait for one. It kicks the dial loop once, so
// a caller does not wait out a long backoff; later attempts keep their backoff, or callers
// that wait long (a mount's event loop) would redial as fast as dials fail.
func (p *peer) session(ctx context.Context, wait time.Duration) (*rpc.Session, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	kicked := false
	for {
		p.mu.Lock()
		sess, changed, attempted, name, addr := p.sess, p.changed, p.attempted, p.cfg.Name, p.cfg.Addr
		p.mu.Unlock()
		if addr == "" {
			if c := p.directCandidates(time.Now()); len(c) > 0 {
				addr = c[0].addr
			}
		}
		if sess != nil && sess.Err() == nil {
			return sess, nil
		}
		if !kicked {
			kicked = true
			select {
			case p.kick <- struct{}{}:
			default:
			}
		}
		select {
		case <-changed:
		case <-attempted:
			p.mu.Lock()
			lastErr := p.lastErr
			p.mu.Unlock()
			if refusal(lastErr) {
				return nil, unreachable(name, addr, lastErr)
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			p.mu.Lock()
			lastErr := p.lastErr
			p.mu.Unlock()
			return nil, unreachable(name, addr, lastErr)
		}
	}
}

func unreachable(name, addr string, lastErr error) error {
	switch {
	case refusal(lastErr):
		return api.Errorf(api.CodeUntrusted, "cannot link to peer %s: %v", name, lastErr)
	case addr == "" && (lastErr == nil || errors.Is(lastErr, errNoCandidate)):
		return api.Errorf(api.CodePeerUnreachable,
			"peer %s is not connected and has no address: set one with \"peerfs peer set %s --addr HOST:PORT\" or start its daemon so it dials us", name, name)
	case lastErr != nil:
		return api.Errorf(api.CodePeerUnreachable, "peer %s (%s) is not connected: %v; check that its daemon runs and the address", name, addr, lastErr)
	}
	return api.Errorf(api.CodePeerUnreachable, "peer %s (%s) is not connected; check that its daemon runs and the address", name, addr)
}

// startDial runs the dial loop until stopDial or ctx ends.
func (p *peer) startDial(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	p.mu.Lock()
	p.dialStop, p.dialDone = cancel, done
	p.mu.Unlock()
	go func() {
		defer close(done)
		p.dialLoop(ctx)
	}()
}

func (p *peer) stopDial() {
	p.mu.Lock()
	stop, done := p.dialStop, p.dialDone
	p.dialStop, p.dialDone = nil, nil
	p.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// stop ends the dial loop and the link.
func (p *peer) stop() {
	p.stopDial()
	p.mu.Lock()
	// A copy: clearSession deletes from p.extra in place (slices.DeleteFunc zeroes the
	// tail), which would leave nil links under this loop.
	sess, extra := p.sess, slices.Clone(p.extra)
	p.mu.Unlock()
	reason := errors.New("peer removed or daemon stopping")
	if sess != nil {
		sess.Close(reason)
	}
	for _, l := range extra {
		l.sess.Close(reason)
	}
}

// dialLoop keeps a link up: while connected it waits for the link to end; otherwise it dials
// the peer's candidates in turn, backing off exponentially (with jitter) after a round in
// which all failed. A kick (a caller waiting, a newly discovered address) dials at once. A
// peer with no candidate yet waits for one: it may dial us, or be discovered.
func (p *peer) dialLoop(ctx context.Context) {
	backoff := backoffMin
	for {
		p.mu.Lock()
		sess, changed, name, id := p.sess, p.changed, p.cfg.Name, p.cfg.ID
		p.mu.Unlock()
		if sess != nil && sess.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				continue
			}
		}
		cands := p.directCandidates(time.Now())
		if len(cands) == 0 {
			p.setError(errNoCandidate)
			select {
			case <-ctx.Done():
				return
			case <-p.kick:
			case <-changed:
			}
			continue
		}
		err := p.dialCandidates(ctx, id, cands)
		if err == nil {
			backoff = backoffMin
			continue
		}
		if ctx.Err() != nil {
			return
		}
		p.setError(err)
		p.n.log.Debug("dial failed", "peer", name, "err", err, "retry_in", backoff)
		t := time.NewTimer(jitter(backoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-p.kick:
			t.Stop()
		case <-changed:
			t.Stop()
		case <-t.C:
		}
		backoff = min(backoff*2, backoffMax)
	}
}

// errNoCandidate: the peer has no address we know of; it can still dial us.
var errNoCandidate = errors.New("no address known for it")

// dialCandidates dials each candidate in turn until one links; the error names each failure.
func (p *peer) dialCandidates(ctx context.Context, id identity.DeviceID, cands []candidate) error {
	var errs []error
	for _, c := range cands {
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		conn, err := transport.Dial(dctx, c.addr, p.n.tcfg, id)
		cancel()
		if err == nil {
			if err = p.n.attach(conn); err == nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		errs = append(errs, fmt.Errorf("%s: %w", c.addr, err))
	}
	return errors.Join(errs...)
}
