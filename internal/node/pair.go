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
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/pair"
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

// acceptPairing runs the pairing over a provisional link the listener admitted. The link
// takes the window, used up from now on, and the outcome goes to the waiting pairShow.
func (n *Node) acceptPairing(ctx context.Context, conn *transport.Conn) {
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
		addr := ""
		if host, _, err := net.SplitHostPort(conn.RemoteAddr().String()); err == nil && res.Hello.Port > 0 {
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
	addrs := []string{p.Addr}
	if p.Addr == "" {
		var err error
		if addrs, err = n.pairLookup(ctx, code); err != nil {
			return nil, err
		}
	}
	// Try the addresses in turn until one answers; the first link that gets through uses
	// the code up, so there is no second try after it.
	var conn *transport.Conn
	var addr string
	var err error
	for _, addr = range addrs {
		conn, err = transport.DialProvisional(ctx, addr, n.tcfg, code.Tag())
		if err == nil || errors.Is(err, transport.ErrRefusedByPeer) {
			break
		}
	}
	if err != nil {
		if errors.Is(err, transport.ErrRefusedByPeer) {
			return nil, api.Errorf(api.CodeCodeUsed, "no device at %s waits for code %s: it was used or expired, or that device shows another code; run \"peerfs pair\" there for a new one", addr, code)
		}
		return nil, api.Errorf(api.CodePeerUnreachable, "cannot reach the device showing code %s: %v", code, err)
	}
	defer conn.Close()
	res, err := pair.Run(ctx, conn, pair.Options{Role: pair.Dialler, Code: code, Hello: n.pairHello(), Trusted: n.isTrusted})
	if err != nil {
		n.log.Warn("pairing failed", "to", addr, "err", err)
		return nil, pairError(err, code)
	}
	return n.addPaired(ctx, res, addr, p.Name)
}

// pairLookupWait bounds the search of the LAN for the device showing a code: it answers
// within a second or two when it is there (discover's lookupRequery).
const pairLookupWait = 15 * time.Second

// pairLookup finds on the LAN the device that announces code's tag.
func (n *Node) pairLookup(ctx context.Context, code pair.Code) ([]string, error) {
	d := n.Discovery()
	if d == nil {
		return nil, api.Errorf(api.CodeInvalid, "LAN discovery is off on this device, so it cannot find the one showing code %s: "+
			"give that device's peer address with --addr HOST:PORT (\"peerfs status\" there shows it as listen)", code)
	}
	lctx, cancel := context.WithTimeout(ctx, pairLookupWait)
	defer cancel()
	found, err := d.Lookup(lctx, code.Tag())
	if err != nil || len(found) == 0 {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, api.Errorf(api.CodeCodeUsed, "no device on this network shows code %s (looked for %v): check the number, that it still waits, "+
			"and that both devices are on the same network, or give its address with --addr HOST:PORT", code, pairLookupWait)
	}
	addrs := make([]string, len(found))
	for i, a := range found {
		addrs[i] = a.String()
	}
	return addrs, nil
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
