package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
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
	lostAt    time.Time     // when the link our calls used ended
	failedAt  time.Time     // when the last try to reach the peer (every candidate and relay) failed
	changed   chan struct{} // closed and replaced whenever sess changes
	attempted chan struct{} // closed and replaced after every failed dial
	kick      chan struct{} // capacity 1: dial now
	dialStop  context.CancelFunc
	dialDone  chan struct{}
	lan       []lanAddr             // where LAN discovery found the peer (candidates.go)
	tries     []api.CandidateStatus // the candidates and relays last tried (candidates.go)
	told      []netip.AddrPort      // interface addresses the peer sent in PUNCH (punch.go)
	noPunch   *rpc.Session          // the link on which the peer refused PUNCH
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
	p.lastErr, p.failedAt = err, time.Now()
	close(p.attempted)
	p.attempted = make(chan struct{})
	p.mu.Unlock()
}

// offline reports whether the peer has no link and could not be reached at the last try
// since it had one (or ever).
func (p *peer) offline() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return (p.sess == nil || p.sess.Err() != nil) && !p.failedAt.IsZero() && !p.failedAt.Before(p.lostAt)
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
	oldLive := old != nil && old.Err() == nil
	newPath, oldPath := p.pathOfLocked(sess), p.pathOfLocked(old)
	switch {
	case oldLive && oldPath.relayed() && !newPath.relayed():
		// A direct path replaces a relayed one, make before break: the relayed link
		// drains (rekey.go) if we opened it, and the peer closes it otherwise.
		p.extra = append(p.extra, link{old, oldConn})
		p.sess, p.conn, p.lastErr = sess, conn, nil
		p.lastAddr = conn.RemoteAddr().String()
		close(p.changed)
		p.changed = make(chan struct{})
		use := p.uses[old]
		p.mu.Unlock()
		if oldConn.Outbound {
			if ctx := p.n.runContext(); ctx != nil {
				go p.drain(ctx, old, use, errGoneDirect)
			}
		}
		return true
	case oldLive && !oldPath.relayed() && newPath.relayed():
		// A relayed link while a direct one is up: the direct one stays, whoever would win
		// a simultaneous dial. One we opened is closed by attach; one the peer opened
		// serves its requests until the peer, which keeps its direct link too, closes it.
		if !conn.Outbound {
			p.extra = append(p.extra, link{sess, conn})
		}
		p.mu.Unlock()
		return false
	case oldLive && !preferred && (conn.Outbound || oldConn.Outbound):
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
	if oldLive {
		// Make before break: what runs on the old link (a pull, a mount's reads) finishes
		// there. One we opened drains and closes (rekey.go); one the peer opened serves
		// until the peer closes it.
		p.extra = append(p.extra, link{old, oldConn})
	}
	use := p.uses[old]
	p.mu.Unlock()
	switch {
	case old == nil:
	case !oldLive:
		old.Close(errReplaced)
	case oldConn.Outbound:
		if ctx := p.n.runContext(); ctx != nil && use != nil {
			go p.drain(ctx, old, use, errReplaced)
		} else {
			old.Close(errReplaced)
		}
	}
	return true
}

// errReplaced closes a link another replaced (the peer's, after both dialled at once).
var errReplaced = errors.New("replaced by a newer link")

// pathOfLocked is how sess runs; p.mu is held.
func (p *peer) pathOfLocked(sess *rpc.Session) linkPath {
	if u := p.uses[sess]; u != nil {
		return u.path
	}
	return linkPath{}
}

// onRelay reports whether the link our calls use runs through a relay.
func (p *peer) onRelay() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sess != nil && p.sess.Err() == nil && p.pathOfLocked(p.sess).relayed()
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
func (p *peer) acquire(ctx context.Context, wait time.Duration, untilFailed bool) (*rpc.Session, *linkUse, error) {
	sess, err := p.session(ctx, wait, untilFailed)
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
	p.lastErr, p.lostAt = sess.Err(), time.Now()
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
// that wait long (a mount's event loop) would redial as fast as dials fail. With untilFailed
// it also gives up as soon as a try to reach the peer fails (an offline peer's question).
func (p *peer) session(ctx context.Context, wait time.Duration, untilFailed bool) (*rpc.Session, error) {
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
			if untilFailed || refusal(lastErr) {
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
	where := ""
	if addr != "" {
		where = " (" + addr + ")"
	}
	switch {
	case refusal(lastErr):
		return api.Errorf(api.CodeUntrusted, "cannot link to peer %s: %v", name, lastErr)
	case addr == "" && (lastErr == nil || errors.Is(lastErr, errNoCandidate)):
		return api.Errorf(api.CodePeerUnreachable,
			"peer %s is not connected and has no address: set one with \"peerfs peer set %s --addr HOST:PORT\", add a relay you both use with \"peerfs relay add URL\", or start its daemon so it dials us", name, name)
	case lastErr != nil:
		return api.Errorf(api.CodePeerUnreachable, "peer %s%s is not connected: %v; check that its daemon runs, its address and relays", name, where, lastErr)
	}
	return api.Errorf(api.CodePeerUnreachable, "peer %s%s is not connected; check that its daemon runs, its address and relays", name, where)
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

// dialLoop keeps a link up: while connected directly it waits for the link to end; while
// connected through a relay it tries the direct candidates now and then (a direct link
// replaces the relayed one, peer.setSession); otherwise it connects (peer.connect: direct
// candidates, then relays), backing off exponentially (with jitter) after a round in which
// all failed. A kick (a caller waiting, a newly discovered address, a network change)
// tries at once. A peer with no candidate and no relay waits for one: it may dial us, or be
// discovered.
func (p *peer) dialLoop(ctx context.Context) {
	backoff := backoffMin
	upgrade := upgradeMin
	for {
		p.mu.Lock()
		sess, changed, name, id := p.sess, p.changed, p.cfg.Name, p.cfg.ID
		p.mu.Unlock()
		if sess != nil && sess.Err() == nil {
			backoff = backoffMin
			cands := p.directCandidates(time.Now())
			if !p.onRelay() || len(cands) == 0 && !p.canPunch(sess, id) {
				upgrade = upgradeMin
				select {
				case <-ctx.Done():
					return
				case <-changed:
				case <-p.kick:
				}
				continue
			}
			// PUNCH first: it tries the peer's interface addresses too, all at once, where
			// plain dials go one by one and wait out each address that drops packets.
			err := errNoCandidate
			if p.canPunch(sess, id) {
				err = p.punchOnce(ctx, sess, id)
			}
			if err != nil && len(cands) > 0 && p.onRelay() {
				err = p.upgrade(ctx, sess, id, cands)
			}
			if err != nil {
				p.n.log.Debug("no direct path yet; the link stays relayed", "peer", name, "err", err, "retry_in", upgrade)
			}
			if err == nil {
				upgrade = upgradeMin
				continue
			}
			t := time.NewTimer(jitter(upgrade))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-changed:
				t.Stop()
			case <-p.kick:
				t.Stop()
			case <-t.C:
			}
			upgrade = min(upgrade*2, upgradeMax)
			continue
		}
		cands := p.directCandidates(time.Now())
		relays := p.n.relayClients()
		if len(cands) == 0 && len(relays) == 0 {
			p.setError(errNoCandidate)
			select {
			case <-ctx.Done():
				return
			case <-p.kick:
			case <-changed:
			}
			continue
		}
		err := p.connect(ctx, id, cands, relays)
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

const (
	// upgradeMin and upgradeMax pace the attempts at a direct path while a relayed link
	// is up: a path that failed usually stays closed until the network changes, which
	// kicks an attempt at once anyway.
	upgradeMin = 2 * time.Second
	upgradeMax = 2 * time.Minute
	// relayYield is how long the device with the larger ID waits before dialling through
	// a relay, so that when both start at once the smaller one's dial arrives first: a
	// relay join and handshake take a few round trips.
	relayYield = 500 * time.Millisecond
	// directDialWait bounds one direct dial, TCP connect and handshake: an address that
	// drops packets (a firewall, a host that left) would otherwise hold a round for the
	// handshake timeout.
	directDialWait = 10 * time.Second
)

// errLinked: a link came up (the peer dialled us) while we were about to dial.
var errLinked = errors.New("linked meanwhile")

// hasLink reports whether a live link serves our calls.
func (p *peer) hasLink() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sess != nil && p.sess.Err() == nil
}

// errNoCandidate: the peer has no address we know of and no relay is configured; it can
// still dial us.
var errNoCandidate = errors.New("no address known for it and no relay configured")

// connect links to the peer: the direct candidates in turn and, after relayHeadStart or once
// they all failed, the relays in turn. The first link up is attached and the other attempt
// abandoned. The error names each candidate and relay and why it failed.
func (p *peer) connect(ctx context.Context, id identity.DeviceID, cands []candidate, relays []*relayClient) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		conn *transport.Conn
		how  linkPath
		err  error
	}
	results := make(chan result, 2)
	attempts := 0
	directDone := make(chan struct{})
	if len(cands) > 0 {
		attempts++
		go func() {
			defer close(directDone)
			conn, err := p.dialDirect(ctx, id, cands)
			results <- result{conn, linkPath{kind: api.PathDirect}, err}
		}()
	} else {
		close(directDone)
	}
	if len(relays) > 0 {
		attempts++
		go func() {
			t := time.NewTimer(relayHeadStart)
			defer t.Stop()
			select {
			case <-t.C:
			case <-directDone:
			case <-ctx.Done():
			}
			// Two devices that know no address of each other both start by dialling
			// through the relay, at once when they start together; the simultaneous-dial
			// rule then closes one of the two links, and what started on it. The larger
			// ID leaves the smaller a moment to dial first.
			if bytes.Compare(p.n.id.ID[:], id[:]) > 0 {
				y := time.NewTimer(relayYield)
				defer y.Stop()
				select {
				case <-y.C:
				case <-ctx.Done():
				}
			}
			if p.hasLink() {
				results <- result{err: errLinked}
				return
			}
			conn, how, err := p.dialRelays(ctx, id, relays)
			results <- result{conn, how, err}
		}()
	}
	// abandon closes what the attempts still running bring, after ctx is cancelled.
	abandon := func(rest int) {
		go func() {
			for range rest {
				if r := <-results; r.conn != nil {
					r.conn.Close()
				}
			}
		}()
	}
	var errs []error
	for i := 0; i < attempts; i++ {
		r := <-results
		if r.err == errLinked {
			cancel()
			abandon(attempts - i - 1)
			return nil
		}
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		cancel()
		abandon(attempts - i - 1)
		return p.n.attachVia(r.conn, r.how)
	}
	return dialErrors(errs)
}

// upgrade tries the direct candidates while sess, a relayed link, is up; a direct link that
// comes up replaces it, make before break.
func (p *peer) upgrade(ctx context.Context, sess *rpc.Session, id identity.DeviceID, cands []candidate) error {
	conn, err := p.dialDirect(ctx, id, cands)
	if err != nil {
		return err
	}
	p.mu.Lock()
	use := p.uses[sess]
	p.mu.Unlock()
	if err := p.n.attachLink(conn, sess, linkPath{kind: api.PathDirect}); err != nil {
		return err
	}
	p.n.log.Info("direct path found; the relayed link drains", "peer", p.name(), "addr", conn.RemoteAddr())
	if ctx := p.n.runContext(); ctx != nil {
		go p.drain(ctx, sess, use, errGoneDirect)
	}
	return nil
}

// dialDirect dials each candidate in turn until one verifies; the error names each failure.
func (p *peer) dialDirect(ctx context.Context, id identity.DeviceID, cands []candidate) (*transport.Conn, error) {
	var errs []error
	for _, c := range cands {
		dctx, cancel := context.WithTimeout(ctx, directDialWait)
		conn, err := p.n.dialTCP(dctx, c.addr, id)
		cancel()
		if ctx.Err() != nil {
			if conn != nil {
				conn.Close()
			}
			return nil, ctx.Err()
		}
		p.tried(c.addr, c.source, err)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, fmt.Errorf("%s (%s): %w", c.addr, c.source, trimDial(err, c.addr)))
	}
	return nil, dialErrors(errs)
}

// dialRelays meets the peer at each relay in turn until one link verifies.
func (p *peer) dialRelays(ctx context.Context, id identity.DeviceID, relays []*relayClient) (*transport.Conn, linkPath, error) {
	var errs []error
	for _, rc := range relays {
		via := rc.url.Redacted()
		conn, err := p.n.dialRelay(ctx, rc, id)
		if ctx.Err() != nil {
			if conn != nil {
				conn.Close()
			}
			return nil, linkPath{}, ctx.Err()
		}
		p.tried(via, candidateRelay, err)
		if err == nil {
			return conn, linkPath{kind: api.PathRelayed, via: via}, nil
		}
		errs = append(errs, fmt.Errorf("relay %s: %w", via, err))
	}
	return nil, linkPath{}, dialErrors(errs)
}

// trimDial drops the "connect to ADDR: " prefix transport.Dial puts before its errors, since
// the caller names the address already.
func trimDial(err error, addr string) error {
	if msg := err.Error(); strings.HasPrefix(msg, "connect to "+addr+": ") {
		return wrapped{strings.TrimPrefix(msg, "connect to "+addr+": "), err}
	}
	return err
}

// wrapped is an error with a message of its own that still unwraps to err.
type wrapped struct {
	msg string
	err error
}

func (w wrapped) Error() string { return w.msg }
func (w wrapped) Unwrap() error { return w.err }

// dialErrors joins the failures of one round in a line ("; " between them), keeping each
// for errors.Is.
func dialErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return joined{strings.Join(msgs, "; "), errs}
}

type joined struct {
	msg  string
	errs []error
}

func (j joined) Error() string   { return j.msg }
func (j joined) Unwrap() []error { return j.errs }

// current is the link our calls use, nil when none.
func (p *peer) current() *rpc.Session {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sess
}
