package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/discover"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/pair"
	"github.com/peerfs/peerfs/internal/relay"
	"github.com/peerfs/peerfs/internal/transport"
)

// Pairing in the daemon (internal/pair does the exchange; docs/PROTOCOL.md, "Pairing").
//
// The device that shows the code opens a pairing window: until the code expires, its
// listener admits a ClientHello that carries the code's pairing tag (transport
// Config.Unproven) as a provisional link, and the first such link takes the window: the code
// is then used up whatever the outcome, so an attacker gets one guess per code. The device
// that types the code dials with the tag and pairs over the link. A device runs one pairing
// at a time, in either role.
//
// The rendezvous (docs/PROTOCOL.md, "Pairing rendezvous"):
//
//  1. on the LAN, the showing device announces the tag (discover.AnnounceTag), the typing
//     device looks it up and dials the addresses it hears (pairLAN);
//  2. at every relay it uses, the showing device waits in a listening join under the code's
//     relay IDs (pair.Code.RelayID, nameplate and epoch only: pairRelayLoop); the typing
//     device joins each of its relays under the current one and runs the same provisional
//     TLS inside the spliced stream (pairRelay), after giving the LAN pairRelayHeadStart;
//  3. the provisional handshakes of the typing device run one at a time (pairRace): the
//     first that gets through takes the code, and a refused one leaves it to the next path.

// PairTimeout is how long a code stays valid: long enough to read it aloud and type it on the
// other device, short enough that a code seen over a shoulder is soon worthless.
const PairTimeout = 5 * time.Minute

var _ api.Pairer = (*Node)(nil)

// pairState is the pairing in progress, if any.
type pairState struct {
	mu     sync.Mutex
	busy   bool        // a pairing runs, in either role
	window *pairWindow // the code this device shows, nil when none
}

// pairWindow is an open pairing window: a code shown and waiting.
type pairWindow struct {
	code    pair.Code
	tag     string
	expires time.Time
	name    string           // --name given with "peerfs pair": the name to give the peer
	taken   bool             // a link took it: the code is used up; guarded by pairState.mu
	done    chan pairOutcome // the taker's outcome, buffered
}

type pairOutcome struct {
	res *api.PairResult
	err error
}

// pairUnproven admits, as a provisional link, a ClientHello carrying the tag of the code
// this device shows while that code waits (transport.Config.Unproven).
func (n *Node) pairUnproven(hello *tls.ClientHelloInfo) bool {
	n.pairing.mu.Lock()
	defer n.pairing.mu.Unlock()
	w := n.pairing.window
	return w != nil && !w.taken && time.Now().Before(w.expires) && hello.ServerName == w.tag
}

// Pair runs "pair": without a code it shows one and waits, with a code it completes the
// pairing that waits on the other device.
func (n *Node) Pair(ctx context.Context, p api.PairParams, emit func(api.Event)) (*api.PairResult, error) {
	if n.ln == nil {
		return nil, api.Errorf(api.CodeInvalid, "this process does not listen for peers: pair through the daemon (\"peerfs daemon\")")
	}
	if p.Name != "" {
		if err := config.CheckPeerName(p.Name); err != nil {
			return nil, api.Errorf(api.CodeInvalid, "--name: %v", err)
		}
		n.mu.Lock()
		old := n.cfg.PeerByName(p.Name)
		n.mu.Unlock()
		if old != nil {
			return nil, api.Errorf(api.CodeInvalid, "a peer named %q already exists (device %s): choose another --name", p.Name, old.ID.Short())
		}
	}
	timeout := PairTimeout
	if p.TimeoutSeconds > 0 && time.Duration(p.TimeoutSeconds)*time.Second < timeout {
		timeout = time.Duration(p.TimeoutSeconds) * time.Second
	}
	if p.Code == "" {
		if p.Addr != "" {
			return nil, api.Errorf(api.CodeInvalid, "--addr goes with a code: on the device that shows the code, run \"peerfs pair\" alone")
		}
		return n.pairShow(ctx, p.Name, timeout, emit)
	}
	code, err := pair.Parse(p.Code)
	if err != nil {
		return nil, api.Errorf(api.CodeInvalid, "%v", err)
	}
	return n.pairJoin(ctx, code, p, timeout)
}

// pairBegin marks a pairing in progress, or says why another cannot start.
func (n *Node) pairBegin() error {
	n.pairing.mu.Lock()
	defer n.pairing.mu.Unlock()
	if n.pairing.busy {
		if w := n.pairing.window; w != nil {
			return api.Errorf(api.CodePairingBusy, "this device already shows pairing code %s (until %s): complete that pairing, or stop it (Ctrl-C where \"peerfs pair\" runs) and start again",
				w.code, w.expires.Format("15:04:05"))
		}
		return api.Errorf(api.CodePairingBusy, "this device is already pairing with another one: wait for that to finish, then try again")
	}
	n.pairing.busy = true
	return nil
}

func (n *Node) pairEnd() {
	n.pairing.mu.Lock()
	defer n.pairing.mu.Unlock()
	n.pairing.busy = false
	n.pairing.window = nil
}

// pairShow makes a code, reports it and waits for the other device.
func (n *Node) pairShow(ctx context.Context, name string, timeout time.Duration, emit func(api.Event)) (*api.PairResult, error) {
	if err := n.pairBegin(); err != nil {
		return nil, err
	}
	defer n.pairEnd()
	code, err := pair.Generate()
	if err != nil {
		return nil, err
	}
	w := &pairWindow{code: code, tag: code.Tag(), expires: time.Now().Add(timeout), name: name, done: make(chan pairOutcome, 1)}
	n.pairing.mu.Lock()
	n.pairing.window = w
	n.pairing.mu.Unlock()
	n.log.Info("pairing: showing a code", "nameplate", code.Nameplate, "expires", w.expires.Format(time.RFC3339))
	// The rendezvous: announce the code's tag on the LAN, so that the other device finds
	// this one by the code alone. The tag says nothing about the words (pair.Code.Tag).
	if d := n.Discovery(); d != nil {
		withdraw, err := d.AnnounceTag(w.tag)
		if err != nil {
			n.log.Warn("pairing: cannot announce the code on the LAN; the other device needs --addr", "err", err)
		} else {
			defer withdraw()
		}
	}
	// ... and wait for it at every relay this device uses.
	rctx, stopRelays := context.WithCancel(ctx)
	var relaysDone sync.WaitGroup
	defer func() {
		stopRelays()
		relaysDone.Wait()
	}()
	for _, rc := range n.relayClients() {
		relaysDone.Add(1)
		go func() {
			defer relaysDone.Done()
			n.pairRelayLoop(rctx, rc, w)
		}()
	}
	emit(api.Event{Type: "start", Code: code.String(), ExpiresSeconds: int(timeout / time.Second)})

	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case o := <-w.done:
		return o.res, o.err
	case <-t.C:
	case <-ctx.Done():
	}
	// Close the window; a link that took it just now finishes first.
	n.pairing.mu.Lock()
	taken := w.taken
	n.pairing.window = nil
	n.pairing.mu.Unlock()
	if taken {
		o := <-w.done
		return o.res, o.err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, api.Errorf(api.CodeCodeExpired, "code %s expired after %v without the other device completing it: run \"peerfs pair\" again for a new code", code, timeout.Round(time.Second))
}

// acceptPairing runs the pairing over a provisional link the listener (or a relay, how)
// admitted. The link takes the window, used up from now on, and the outcome goes to the
// waiting pairShow.
func (n *Node) acceptPairing(ctx context.Context, conn *transport.Conn, how linkPath) {
	defer conn.Close()
	n.pairing.mu.Lock()
	w := n.pairing.window
	if w == nil || w.taken || !time.Now().Before(w.expires) {
		n.pairing.mu.Unlock()
		n.refused.note("pairing link without a waiting code", conn.RemoteAddr().String(), nil)
		return
	}
	w.taken = true
	n.pairing.mu.Unlock()

	res, err := pair.Run(ctx, conn, pair.Options{Role: pair.Listener, Code: w.code, Hello: n.pairHello(), Trusted: n.isTrusted})
	var out pairOutcome
	if err != nil {
		n.log.Warn("pairing failed", "from", conn.RemoteAddr(), "err", err)
		out.err = pairError(err, w.code)
	} else {
		// A link through a relay comes from the relay's address: the peer is reached there
		// through its rendezvous IDs, not at an address.
		addr := ""
		if host, _, err := net.SplitHostPort(conn.RemoteAddr().String()); err == nil && res.Hello.Port > 0 && !how.relayed() {
			addr = net.JoinHostPort(host, strconv.Itoa(res.Hello.Port))
		}
		out.res, out.err = n.addPaired(ctx, res, addr, w.name)
	}
	w.done <- out
}

// pairJoin completes the pairing another device shows code for.
func (n *Node) pairJoin(ctx context.Context, code pair.Code, p api.PairParams, timeout time.Duration) (*api.PairResult, error) {
	if p.Addr != "" {
		if err := config.CheckAddr(p.Addr); err != nil {
			return nil, api.Errorf(api.CodeInvalid, "--addr %q: %v", p.Addr, err)
		}
	}
	if err := n.pairBegin(); err != nil {
		return nil, err
	}
	defer n.pairEnd()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var conn *transport.Conn
	var addr string
	var err error
	if p.Addr != "" {
		addr = p.Addr
		conn, err = transport.DialProvisional(ctx, addr, n.tcfg, code.Tag())
		if errors.Is(err, transport.ErrRefusedByPeer) {
			return nil, api.Errorf(api.CodeCodeUsed, "no device at %s waits for code %s: it was used or expired, or that device shows another code; run \"peerfs pair\" there for a new one", addr, code)
		}
		if err != nil {
			return nil, api.Errorf(api.CodePeerUnreachable, "cannot reach the device showing code %s: %v", code, err)
		}
	} else if conn, addr, err = n.pairFind(ctx, code); err != nil {
		return nil, err
	}
	defer conn.Close()
	res, err := pair.Run(ctx, conn, pair.Options{Role: pair.Dialler, Code: code, Hello: n.pairHello(), Trusted: n.isTrusted})
	if err != nil {
		n.log.Warn("pairing failed", "to", addr, "err", err)
		return nil, pairError(err, code)
	}
	return n.addPaired(ctx, res, addr, p.Name)
}

const (
	// pairLookupWait bounds the search of the LAN for the device showing a code. That
	// device announces the code's tag unasked as it shows it, and answers each query of
	// the lookup, which asks again every second (discover's lookupRequery): five queries
	// unanswered mean it is not on this network. mDNS has no negative answer, so the
	// bound is what a code nobody shows costs on the LAN.
	pairLookupWait = 5 * time.Second
	// pairRelayWait bounds a dialling join at one relay for the device showing a code: it
	// waits there all along, so a meeting takes a round trip; the bound covers its joining
	// again after a stream that did not take the code (a round trip and the relay's TLS).
	pairRelayWait = 3 * time.Second
	// pairRelayHeadStart is how long the LAN search goes alone before the relays are asked:
	// on a LAN the device showing the code answers the first query within a few ms, and
	// the lookup gathers 100 ms more (discover's lookupGather); a device found there is
	// reached without the relay's hop, and remembered at its address. Past it, a pairing
	// across networks should not wait longer.
	pairRelayHeadStart = 500 * time.Millisecond
)

// pairPath is one way to the device showing a code, ready for the provisional handshake.
type pairPath struct {
	raw  net.Conn // connected; nil: dial addr
	addr string   // a LAN address, or "" through a relay
	via  string   // the relay, for messages
}

// pairRace runs the provisional handshakes of the paths the searches find one at a time:
// the first that gets through takes the code on the other device, so a second must never
// start then; one refused (no code waits there) leaves the code to the next.
type pairRace struct {
	n    *Node
	code pair.Code
	turn chan struct{} // capacity 1: held while a handshake runs

	mu       sync.Mutex
	won      *transport.Conn
	wonAddr  string
	refused  []string // where a device refused the code
	broken   []string // handshakes that failed otherwise: a device was found but not reached
	failures []string // what else went wrong, for the error
}

// try runs the handshake on path unless another one won; it reports whether this one won.
func (r *pairRace) try(ctx context.Context, path pairPath) bool {
	select {
	case r.turn <- struct{}{}:
	case <-ctx.Done():
		if path.raw != nil {
			path.raw.Close()
		}
		return false
	}
	defer func() { <-r.turn }()
	if r.done() {
		if path.raw != nil {
			path.raw.Close()
		}
		return false
	}
	var conn *transport.Conn
	var err error
	where := path.addr
	if path.raw != nil {
		where = "relay " + path.via
		conn, err = transport.ClientProvisional(ctx, path.raw, r.n.tcfg, r.code.Tag())
	} else {
		conn, err = transport.DialProvisional(ctx, path.addr, r.n.tcfg, r.code.Tag())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		r.won, r.wonAddr = conn, path.addr
		return true
	case errors.Is(err, transport.ErrRefusedByPeer):
		r.refused = append(r.refused, where)
	default:
		r.broken = append(r.broken, fmt.Sprintf("%s: %v", where, err))
	}
	return false
}

func (r *pairRace) done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.won != nil
}

func (r *pairRace) fail(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, what)
}

// pairFind finds the device showing code on the LAN and at this device's relays at once,
// and returns the provisional link to it, with the LAN address it was found at ("" through
// a relay).
func (n *Node) pairFind(ctx context.Context, code pair.Code) (*transport.Conn, string, error) {
	d, relays := n.Discovery(), n.relayClients()
	if d == nil && len(relays) == 0 {
		return nil, "", api.Errorf(api.CodeInvalid, "LAN discovery is off on this device and it uses no relay, so it cannot find the one showing code %s: "+
			"give that device's peer address with --addr HOST:PORT (\"peerfs status\" there shows it as listen), or add a relay you both use (\"peerfs relay add URL\")", code)
	}
	race := &pairRace{n: n, code: code, turn: make(chan struct{}, 1)}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	lanDone := make(chan struct{})
	if d != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(lanDone)
			if n.pairLAN(fctx, d, race) {
				cancel()
			}
		}()
	} else {
		close(lanDone)
	}
	for _, rc := range relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d != nil {
				// The LAN first: a device found there is reached without a relay's hop.
				t := time.NewTimer(pairRelayHeadStart)
				select {
				case <-t.C:
				case <-lanDone:
					t.Stop()
				case <-fctx.Done():
					t.Stop()
					return
				}
			}
			if n.pairRelay(fctx, rc, race) {
				cancel()
			}
		}()
	}
	wg.Wait()
	if race.won != nil {
		return race.won, race.wonAddr, nil
	}
	if ctx.Err() != nil {
		return nil, "", ctx.Err()
	}
	where := "on this network"
	if d == nil {
		where = "at this device's relays"
	} else if len(relays) > 0 {
		where = "on this network or at this device's relays"
	}
	if len(race.refused) > 0 {
		return nil, "", api.Errorf(api.CodeCodeUsed, "no device waits for code %s (refused at %s): it was used or expired, or that device shows another code; run \"peerfs pair\" there for a new one",
			code, strings.Join(race.refused, ", "))
	}
	if len(race.broken) > 0 {
		return nil, "", api.Errorf(api.CodePeerUnreachable, "cannot reach the device showing code %s: %s", code, strings.Join(race.broken, "; "))
	}
	msg := fmt.Sprintf("no device %s shows code %s: check the number, that it still waits, and that both devices are on the same network or use the same relay, "+
		"or give its address with --addr HOST:PORT", where, code)
	if len(race.failures) > 0 {
		msg += " (" + strings.Join(race.failures, "; ") + ")"
	}
	return nil, "", api.Errorf(api.CodeCodeUsed, "%s", msg)
}

// pairLAN looks up code's tag on the LAN and tries the addresses heard; it reports whether
// it won the race.
func (n *Node) pairLAN(ctx context.Context, d *discover.Service, race *pairRace) bool {
	lctx, cancel := context.WithTimeout(ctx, pairLookupWait)
	defer cancel()
	found, err := d.Lookup(lctx, race.code.Tag())
	if err != nil || len(found) == 0 {
		if ctx.Err() == nil {
			race.fail(fmt.Sprintf("nothing heard on the LAN within %v", pairLookupWait))
		}
		return false
	}
	for _, a := range found {
		if race.try(ctx, pairPath{addr: a.String()}) {
			return true
		}
	}
	return false
}

// pairRelay meets the device showing race's code at rc's relay and tries the stream; it
// reports whether it won the race, within pairRelayWait.
func (n *Node) pairRelay(ctx context.Context, rc *relayClient, race *pairRace) bool {
	via := rc.url.Redacted()
	tr := rc.transportNow()
	for {
		dctx, cancel := context.WithTimeout(ctx, pairRelayWait)
		var joined atomic.Bool
		opts := &relay.Options{Transport: tr, DialContext: dialDeadPath, Joined: func() { joined.Store(true) }}
		id := relay.ID(race.code.RelayID(pair.RelayEpochOf(time.Now())))
		sess, err := relay.Dial(dctx, rc.url, relay.RoleDial, []relay.ID{id}, opts)
		cancel()
		switch {
		case err == nil:
			rc.worked(tr, sess.Observed, false)
			return race.try(ctx, pairPath{raw: sess.Conn, via: via})
		case ctx.Err() != nil:
			return false
		case joined.Load() && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, relay.ErrNoPartner)):
			race.fail(fmt.Sprintf("nobody waits at relay %s", via))
			return false
		case rc.failed(tr, err):
			tr = relay.TransportWebSocket
			continue
		}
		race.fail(fmt.Sprintf("relay %s: %v", via, err))
		return false
	}
}

// pairRelayLoop keeps a listening join under w's relay IDs waiting at rc's relay while w
// waits, and hands each stream paired there to the usual accepting path, which admits the
// code's tag as on the listener (pairUnproven).
func (n *Node) pairRelayLoop(ctx context.Context, rc *relayClient, w *pairWindow) {
	via := rc.url.Redacted()
	backoff := backoffMin
	// One warning per pairing, then debug lines: a relay down for the code's 5 minutes
	// would otherwise log every few seconds.
	warned := false
	warnOnce := func(msg string, args ...any) {
		if warned {
			n.log.Debug(msg, args...)
			return
		}
		warned = true
		n.log.Warn(msg, args...)
	}
	for ctx.Err() == nil {
		// The previous, current and next epochs' IDs, as relay.ListenIDs: a typing device
		// whose clock is up to an epoch off still meets this one.
		e := pair.RelayEpochOf(time.Now())
		ids := []relay.ID{relay.ID(w.code.RelayID(e - 1)), relay.ID(w.code.RelayID(e)), relay.ID(w.code.RelayID(e + 1))}
		tr := rc.transportNow()
		sess, err := relay.Dial(ctx, rc.url, relay.RoleListen, ids, &relay.Options{Transport: tr, DialContext: dialDeadPath})
		switch {
		case err == nil:
			backoff = backoffMin
			rc.worked(tr, sess.Observed, false)
			n.serveIncoming(ctx, sess, linkPath{kind: api.PathRelayed, via: via})
			continue
		case ctx.Err() != nil:
			return
		case errors.Is(err, relay.ErrNoPartner):
			continue // the relay's pending-join timeout
		case errors.Is(err, relay.ErrReplaced):
			// Another device waits at this relay under the same number: the newer join
			// wins there, so joining again at once would only take turns with it.
			warnOnce("pairing: another device shows a code with the same number at this relay; waiting there in turns with it",
				"relay", via, "nameplate", w.code.Nameplate)
		case rc.failed(tr, err):
			continue
		default:
			warnOnce("pairing: cannot wait at the relay; retrying with backoff", "relay", via, "err", err)
		}
		t := time.NewTimer(jitter(backoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, listenBackoffMax)
	}
}

// pairHello is what this device tells the other about itself.
func (n *Node) pairHello() pair.Hello {
	h := pair.Hello{Name: n.name()}
	if a, ok := n.ln.Addr().(*net.TCPAddr); ok {
		h.Port = a.Port
	}
	return h
}

func (n *Node) isTrusted(id identity.DeviceID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.peers[id] != nil
}

// pairError turns a failed run into the error the user sees.
func pairError(err error, code pair.Code) error {
	switch {
	case errors.Is(err, pair.ErrWrongCode):
		return api.Errorf(api.CodeWrongCode, "wrong code: the two devices did not use the same code (or someone interfered), and code %s is now used up; "+
			"run \"peerfs pair\" again on the device that shows the code and type the new one", code)
	case errors.Is(err, pair.ErrAlreadyTrusted):
		return api.Errorf(api.CodeAlreadyTrusted, "%v: the two devices are paired already (see \"peerfs peer ls\"); to pair again, remove the peer with \"peerfs peer rm NAME\" on both", err)
	case errors.Is(err, context.DeadlineExceeded):
		return api.Errorf(api.CodePeerUnreachable, "the pairing did not finish in time: %v; run \"peerfs pair\" again", err)
	}
	return api.Errorf(api.CodeInternal, "pairing failed: %v; run \"peerfs pair\" again", err)
}

// addPaired writes the confirmed peer into the config as trusted, under name or a free
// form of the name it chose, with addr to dial it at, and applies the config: the two
// connect at once.
func (n *Node) addPaired(ctx context.Context, res *pair.Result, addr, name string) (*api.PairResult, error) {
	var peer config.Peer
	err := config.Update(n.paths, func(f *config.File) error {
		if old := f.PeerByID(res.Peer); old != nil {
			return api.Errorf(api.CodeAlreadyTrusted, "device %s is already trusted as %q", res.Peer.Short(), old.Name)
		}
		if name != "" && f.PeerByName(name) != nil {
			// Checked again here: another peer may have taken it meanwhile.
			name = ""
		}
		if name == "" {
			name = freePeerName(f, res.Hello.Name)
		}
		peer = config.Peer{Name: name, ID: res.Peer, Addr: addr, Secret: res.Secret}
		f.Peers = append(f.Peers, peer)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := n.Reload(ctx); err != nil {
		return nil, err
	}
	n.log.Info("paired", "peer", peer.Name, "device_id", peer.ID, "addr", peer.Addr)
	return &api.PairResult{Name: peer.Name, DeviceID: peer.ID, Addr: peer.Addr}, nil
}

// freePeerName makes a valid peer name from the one the device chose, unique in f: lower
// case, other characters as '-', "-2", "-3"... added when taken.
func freePeerName(f *config.File, chosen string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(chosen) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	base := strings.Trim(b.String(), "-")
	if len(base) > config.MaxPeerNameLen-4 {
		base = base[:config.MaxPeerNameLen-4]
	}
	if base == "" {
		base = "peer"
	}
	name := base
	for i := 2; f.PeerByName(name) != nil; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return name
}
