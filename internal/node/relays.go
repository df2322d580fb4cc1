package node

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/relay"
	"github.com/peerfs/peerfs/internal/transport"
)

// Relays (docs/RELAY.md, "How a device uses a relay").
//
// A daemon keeps, per configured relay, one listening join waiting there (listenLoop):
//
//  1. relay.Dial in RoleListen with the rendezvous IDs of every trusted peer for the
//     previous, current and next epochs (relay.ListenIDs);
//  2. when a peer's dialling join meets it, the relay pairs them and Dial returns the raw
//     stream: it goes through the same gate and handshake as an accepted TCP connection
//     (serveIncoming), and a new listening join is sent at once;
//  3. the join is renewed when the epoch turns (the IDs rotate hourly), when the trusted
//     peers change, and after the relay's pending-join timeout (5 minutes);
//  4. raw TLS first; when it fails for a reason other than a refusal by the relay (a
//     network that passes only HTTPS), a WebSocket inside TLS on the same port.
//
// To reach a peer, the dial loop (peer.connect) gives direct candidates a head start, then
// joins in RoleDial at each relay in turn for up to relayDialWait and runs the devices'
// own TLS (transport.Client) on the stream.
const (
	// relayDialWait bounds a dialling join's wait at one relay for the peer's listening
	// join: a listening peer is already waiting there, so a meeting takes one round trip
	// to the relay; nobody coming within it means the peer is not at that relay.
	relayDialWait = 5 * time.Second
	// relayHeadStart is how long direct candidates are tried alone before relays are tried
	// beside them (happy eyeballs): a reachable address answers in a round trip, and
	// a direct link saves the relay's hop and its bandwidth.
	relayHeadStart = time.Second
	// relayRenewJitter spreads the renewals of many devices after the epoch turns.
	relayRenewJitter = 10 * time.Second
	// listenBackoffMax caps the wait between attempts to join an unreachable relay. Peers
	// reach this device there only while its join waits, and a mount on a peer must read
	// again within 10 s of the network coming back, so the wait stays short (with jitter at
	// most 7.5 s); a join costs the relay one TLS handshake.
	listenBackoffMax = 5 * time.Second
)

// relayClient is this device's state at one relay.
type relayClient struct {
	url   relay.URL
	renew chan struct{} // capacity 1: send a new listening join now
	stop  context.CancelFunc
	done  chan struct{} // closed when listenLoop returns; nil if it never ran

	mu       sync.Mutex
	joined   bool      // a listening join waits there
	since    time.Time // joined since (the first of consecutive joins)
	ws       bool      // raw TLS failed and WebSocket is what we use
	wsWorked bool      // the last success was over WebSocket
	observed netip.AddrPort
	sessions int
	lastErr  error
}

func newRelayClient(u relay.URL) *relayClient {
	return &relayClient{url: u, renew: make(chan struct{}, 1)}
}

func (rc *relayClient) kick() {
	select {
	case rc.renew <- struct{}{}:
	default:
	}
}

// transportNow is what to reach the relay with first.
func (rc *relayClient) transportNow() relay.Transport {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.ws {
		return relay.TransportWebSocket
	}
	return relay.TransportTLS
}

// observedAddr is the address the relay last saw us at; invalid before a session.
func (rc *relayClient) observedAddr() netip.AddrPort {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.observed
}

func (rc *relayClient) status() api.RelayStatus {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	st := api.RelayStatus{URL: rc.url.Redacted(), Connected: rc.joined, Sessions: rc.sessions}
	if rc.joined {
		st.Since = rc.since
	}
	if rc.joined || rc.sessions > 0 {
		st.Transport = "tls"
		if rc.wsWorked {
			st.Transport = "websocket"
		}
	}
	if rc.observed.IsValid() {
		st.Observed = rc.observed.String()
	}
	if rc.lastErr != nil {
		st.LastError = rc.lastErr.Error()
	}
	return st
}

// worked records a successful join or session over tr.
func (rc *relayClient) worked(tr relay.Transport, observed netip.AddrPort, session bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.lastErr = nil
	rc.wsWorked = tr != relay.TransportTLS
	rc.ws = rc.wsWorked
	if observed.IsValid() {
		rc.observed = observed
	}
	if session {
		rc.sessions++
	}
}

// failed records a failed join over tr and reports whether the other transport is worth a
// try at once: a raw TLS connection that failed without the relay refusing us may pass as
// a WebSocket (networks that let out only HTTPS).
func (rc *relayClient) failed(tr relay.Transport, err error) (tryWebSocket bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.lastErr = err
	if tr == relay.TransportTLS && !relayRefused(err) {
		rc.ws = true
		return true
	}
	rc.ws = false // next time raw TLS first again
	return false
}

func (rc *relayClient) setJoined(joined bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if joined && !rc.joined {
		rc.since = time.Now()
	}
	rc.joined = joined
}

// relayRefused reports whether the relay itself answered err: another transport to the
// same relay would get the same answer.
func relayRefused(err error) bool {
	for _, e := range []error{relay.ErrRelayFull, relay.ErrRelayToken, relay.ErrNoPartner, relay.ErrReplaced,
		relay.ErrBadJoin, relay.ErrRelayClosing, relay.ErrWrongRelay} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// applyRelaysLocked makes the node's relays those of urls, in order; trustChanged renews
// the listening joins of those kept. n.mu is held.
func (n *Node) applyRelaysLocked(urls []relay.URL, trustChanged bool) {
	old := n.relays
	n.relays = make([]*relayClient, 0, len(urls))
	for _, u := range urls {
		var rc *relayClient
		for i, o := range old {
			if o != nil && o.url == u {
				rc, old[i] = o, nil
				break
			}
		}
		if rc == nil {
			rc = newRelayClient(u)
			if n.runCtx != nil {
				n.startRelayLocked(rc)
			}
		} else if trustChanged {
			rc.kick()
		}
		n.relays = append(n.relays, rc)
	}
	for _, o := range old {
		if o != nil && o.stop != nil {
			o.stop()
		}
	}
}

// startRelayLocked runs rc's listening loop under Run's context; a standalone node only
// dials through its relays. n.mu is held.
func (n *Node) startRelayLocked(rc *relayClient) {
	if n.alone || rc.done != nil {
		return
	}
	ctx, cancel := context.WithCancel(n.runCtx)
	rc.stop, rc.done = cancel, make(chan struct{})
	go func() {
		defer close(rc.done)
		n.listenLoop(ctx, rc)
	}()
}

// relayClients is the configured relays, in order.
func (n *Node) relayClients() []*relayClient {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*relayClient(nil), n.relays...)
}

// relayByURL is the configured relay whose redacted URL is via, or nil.
func (n *Node) relayByURL(via string) *relayClient {
	for _, rc := range n.relayClients() {
		if rc.url.Redacted() == via {
			return rc
		}
	}
	return nil
}

// stopRelays ends every listening loop and waits for them.
func (n *Node) stopRelays() {
	for _, rc := range n.relayClients() {
		if rc.stop != nil {
			rc.stop()
			<-rc.done
		}
	}
}

// listenLoop keeps a listening join waiting at rc's relay (see the flow above).
func (n *Node) listenLoop(ctx context.Context, rc *relayClient) {
	backoff := backoffMin
	for ctx.Err() == nil {
		peers := n.trusted()
		if len(peers) == 0 {
			rc.setJoined(false)
			select {
			case <-ctx.Done():
				return
			case <-rc.renew:
			}
			continue
		}
		if max := relay.MaxJoinIDs / 3; len(peers) > max {
			// One join names three epochs' IDs per peer, at most MaxJoinIDs in all.
			n.log.Warn("more trusted peers than one relay join can name; the others reach this device only directly",
				"relay", rc.url.Redacted(), "peers", len(peers), "named", max)
			peers = peers[:max]
		}
		tr := rc.transportNow()
		sess, renewed, err := n.listenOnce(ctx, rc, peers, tr)
		rc.setJoined(false)
		switch {
		case err == nil:
			backoff = backoffMin
			rc.worked(tr, sess.Observed, true)
			n.serveIncoming(ctx, sess, linkPath{kind: api.PathRelayed, via: rc.url.Redacted()})
			continue
		case ctx.Err() != nil:
			return
		case renewed, errors.Is(err, relay.ErrNoPartner):
			// Renewal, or the relay's pending-join timeout: join again at once.
			continue
		}
		if rc.failed(tr, err) {
			n.log.Debug("relay unreachable over raw TLS; trying WebSocket", "relay", rc.url.Redacted(), "err", err)
			continue
		}
		if backoff == backoffMin {
			n.log.Warn("relay unreachable; retrying with backoff", "relay", rc.url.Redacted(), "err", err)
		} else {
			n.log.Debug("relay unreachable", "relay", rc.url.Redacted(), "err", err, "retry_in", backoff)
		}
		t := time.NewTimer(jitter(backoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-rc.renew:
			t.Stop()
		case <-t.C:
		}
		backoff = min(backoff*2, listenBackoffMax)
	}
}

// listenOnce sends one listening join and waits for a peer, until the epoch turns, the
// join is renewed (rc.renew) or ctx ends; renewed reports the first two.
func (n *Node) listenOnce(ctx context.Context, rc *relayClient, peers []identity.DeviceID, tr relay.Transport) (sess *relay.Session, renewed bool, err error) {
	now := time.Now()
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var renew atomic.Bool
	epochEnd := time.Unix((relay.EpochOf(now)+1)*int64(relay.Epoch/time.Second), 0)
	t := time.AfterFunc(time.Until(epochEnd)+jitter(relayRenewJitter), func() { renew.Store(true); cancel() })
	defer t.Stop()
	go func() {
		select {
		case <-rc.renew:
			renew.Store(true)
			cancel()
		case <-jctx.Done():
		}
	}()
	opts := &relay.Options{Transport: tr, DialContext: dialDeadPath, Joined: func() {
		rc.setJoined(true)
		rc.worked(tr, netip.AddrPort{}, false)
	}}
	sess, err = relay.Dial(jctx, rc.url, relay.RoleListen, relay.ListenIDs(n.id.ID, peers, now), opts)
	return sess, renew.Load(), err
}

// dialRelay meets the peer id at rc's relay and runs our TLS to it on the stream. It waits
// up to relayDialWait for the peer; raw TLS failing, it tries a WebSocket.
func (n *Node) dialRelay(ctx context.Context, rc *relayClient, id identity.DeviceID) (*transport.Conn, error) {
	tr := rc.transportNow()
	for {
		dctx, cancel := context.WithTimeout(ctx, relayDialWait)
		var joined atomic.Bool
		opts := &relay.Options{Transport: tr, DialContext: dialDeadPath, Joined: func() { joined.Store(true) }}
		sess, err := relay.Dial(dctx, rc.url, relay.RoleDial, []relay.ID{relay.DialID(n.id.ID, id, time.Now())}, opts)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case joined.Load() && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, relay.ErrNoPartner)):
			return nil, errNotAtRelay
		case rc.failed(tr, err):
			tr = relay.TransportWebSocket
			continue
		default:
			return nil, err
		}
		rc.worked(tr, sess.Observed, false)
		return transport.Client(ctx, sess, n.tcfg, id)
	}
}

// errNotAtRelay: the relay took our join but the peer did not meet us there.
var errNotAtRelay = errors.New("the peer is not waiting at this relay: is its daemon running, with this relay added?")
