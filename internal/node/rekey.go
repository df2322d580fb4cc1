package node

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/transport"
	"github.com/peerfs/peerfs/internal/wire"
)

// Renewing link keys.
//
// Go's crypto/tls answers a KeyUpdate but never sends one, so a link keeps the keys of its
// handshake for as long as it lives. AES-128-GCM's limit in RFC 8446 §5.5 is about 2^24.5 full
// records per direction and key (about 380 GB); peerfs reaches that in minutes at the rates
// it runs at. A link is therefore replaced by a fresh handshake, make before break:
//
//  1. the side that dialled the link (it knows the address) sees either direction pass
//     RekeyBytes, or the link reach RekeyAfter, and dials a new link;
//  2. the new link becomes the one calls use on both sides (peer.setSession; on the
//     accepting side the newest link the peer opened always does);
//  3. the old link keeps serving what runs on it: our calls and transfers in flight
//     (linkUse.active) and the peer's requests, push streams included (linkUse.served);
//  4. once both are zero and the peer has opened nothing on it for drainGrace, it closes.
//     Change subscriptions (WATCH) are not waited for: a mount resubscribes on the new link
//     and rescans, as after any reconnect.
//
// Whatever is still running, a link is closed once either direction passes
// RekeyLimitBytes, well inside the AEAD limit; a transfer cut there resumes when run again.
const (
	// DefaultRekeyBytes is the traffic in one direction after which a link is replaced: a
	// sixth of AES-128-GCM's limit, so a link still draining has room to finish.
	DefaultRekeyBytes = 64 << 30
	// DefaultRekeyAfter is the age after which a link is replaced, so that keys do not live
	// for days on a quiet link.
	DefaultRekeyAfter = time.Hour
	// DefaultRekeyLimitBytes is the traffic in one direction at which a link is closed
	// whatever runs on it: two thirds of the AEAD limit.
	DefaultRekeyLimitBytes = 256 << 30
	// drainGrace is how long an old link must see no new request from the peer before it
	// closes. The peer switches to the new link when its HELLO completes, a round trip after
	// ours, and a request it sent just before must still find the old link open; and a
	// transfer the peer runs keeps the link it started on (node.use), which we cannot see
	// between two of its requests. Five seconds covers a pause of the peer's disk between
	// files; a longer one at that moment fails the transfer, which resumes when run again.
	drainGrace = 5 * time.Second
	// keyCheck is how often a link's traffic and age are compared with the limits: at
	// 2 GiB/s a link moves 500 MB in that time, far inside the margins above.
	keyCheck = 250 * time.Millisecond
)

// errKeyLimit closes a link that reached RekeyLimitBytes.
var errKeyLimit = errors.New("link reached its key usage limit; it is closed so that a fresh handshake renews its keys")

// errRekeyed closes a link replaced by a fresh one once it drained.
var errRekeyed = errors.New("replaced by a fresh link to renew its keys")

// errGoneDirect closes a relayed link replaced by a direct one once it drained.
var errGoneDirect = errors.New("replaced by a direct path")

// linkUse counts what runs on one link, so that a replaced link closes only when idle.
type linkUse struct {
	path       linkPath     // how the link runs; set before the link is shared
	active     atomic.Int64 // our calls and transfers on it (peer.acquire)
	served     atomic.Int64 // the peer's requests being served, WATCH aside
	lastServed atomic.Int64 // when the peer last opened one, Unix ns
}

// done ends one use that peer.acquire counted; u may be nil.
func (u *linkUse) done() {
	if u != nil {
		u.active.Add(-1)
	}
}

// usageHandler counts the requests a link serves for linkUse. It keeps the share server's
// Inline answers, so that counting does not cost the read-loop fast path.
type usageHandler struct {
	srv   rpc.Inliner
	use   *linkUse
	punch func(*rpc.Request) // PUNCH is about the link, not a share (punch.go)
}

func (h usageHandler) ServeRequest(r *rpc.Request) {
	if r.Op == wire.OpPunch {
		h.punch(r)
		return
	}
	if r.Op != wire.OpWatch {
		h.use.lastServed.Store(time.Now().UnixNano())
		h.use.served.Add(1)
		defer h.use.served.Add(-1)
	}
	h.srv.ServeRequest(r)
}

func (h usageHandler) Inline(op wire.Op, size int) bool { return h.srv.Inline(op, size) }

// rekeyOptions are the limits of one node.
type rekeyOptions struct {
	bytes, limit uint64
	after        time.Duration
}

// watchKeys runs for the life of a link: it closes it at the hard limit and, while it is
// the link our calls use and we dialled it, replaces it at the soft limits.
func (p *peer) watchKeys(ctx context.Context, sess *rpc.Session, conn *transport.Conn, use *linkUse) {
	ro := p.n.rekey
	start := time.Now()
	t := time.NewTicker(keyCheck)
	defer t.Stop()
	retry := time.Time{} // no new link before this, after a failed dial
	backoff := backoffMin
	replaced := false // a new link took over; this one drains, still under the hard limit
	for {
		select {
		case <-sess.Done():
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		in, out := sess.BytesIn(), sess.BytesOut()
		if max(in, out) >= ro.limit {
			p.n.log.Warn("closing a link at its key usage limit", "peer", p.name(), "bytes_in", in, "bytes_out", out)
			sess.Close(errKeyLimit)
			return
		}
		if replaced || !conn.Outbound || max(in, out) < ro.bytes && time.Since(start) < ro.after || time.Now().Before(retry) {
			continue
		}
		p.mu.Lock()
		current := p.sess == sess
		p.mu.Unlock()
		if !current {
			continue // another link serves our calls; ours drains or is the peer's to replace
		}
		if err := p.rekey(ctx, sess, conn, use); err != nil {
			p.n.log.Warn("renewing the link's keys failed; the link stays until it succeeds", "peer", p.name(), "err", err, "retry_in", backoff)
			retry = time.Now().Add(backoff)
			backoff = min(2*backoff, backoffMax)
			continue
		}
		replaced = true
	}
}

// rekey dials a new link the way sess runs (the same address, or the same relay) to
// replace it, then lets sess drain and close. A punched path cannot be dialled again (the
// routers let in only a punch), so a punched link is replaced by a relayed one, which the
// dial loop then punches again (PUNCH), make before break both times.
func (p *peer) rekey(ctx context.Context, sess *rpc.Session, old *transport.Conn, use *linkUse) error {
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var conn *transport.Conn
	how := use.path
	var err error
	switch {
	case how.relayed():
		rc := p.n.relayByURL(how.via)
		if rc == nil {
			return fmt.Errorf("relay %s is no longer configured", how.via)
		}
		conn, err = p.n.dialRelay(dctx, rc, p.cfg.ID)
	case how.kind == api.PathPunched:
		relays := p.n.relayClients()
		if len(relays) == 0 {
			return errors.New("a punched link is renewed through a relay, and none is configured")
		}
		conn, how, err = p.dialRelays(dctx, p.cfg.ID, relays)
	default:
		conn, err = p.n.dialTCP(dctx, old.RemoteAddr().String(), p.cfg.ID)
	}
	if err != nil {
		return err
	}
	if err := p.n.attachLink(conn, sess, how); err != nil {
		return err
	}
	p.mu.Lock()
	replaced := p.sess != sess
	if replaced {
		p.rekeys++
	}
	p.mu.Unlock()
	if !replaced {
		return fmt.Errorf("the new link did not take over")
	}
	p.n.log.Info("link replaced to renew its keys", "peer", p.name(), "bytes_in", sess.BytesIn(), "bytes_out", sess.BytesOut())
	go p.drain(ctx, sess, use, errRekeyed)
	return nil
}

// drain closes a replaced link once nothing runs on it (see the flow above).
func (p *peer) drain(ctx context.Context, sess *rpc.Session, use *linkUse, reason error) {
	switched := time.Now()
	t := time.NewTicker(keyCheck / 5)
	defer t.Stop()
	for {
		select {
		case <-sess.Done():
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if p.current() == sess {
			return // the link it gave way to ended first, and it took its place again
		}
		last := time.Unix(0, use.lastServed.Load())
		if use.active.Load() == 0 && use.served.Load() == 0 &&
			time.Since(switched) >= drainGrace && time.Since(last) >= drainGrace {
			sess.Close(reason)
			return
		}
	}
}
