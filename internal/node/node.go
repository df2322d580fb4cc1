// Package node is the composition root of a running device: it owns the trusted peers and
// their links, the exported shares, and the transfers in progress, and implements the daemon's
// control API (api.Backend) on top of them.
//
// Link lifecycle: every trusted peer with a known address has a dial loop that connects,
// verifies (internal/transport), negotiates (internal/rpc) and, when the link ends, redials
// with exponential backoff. Incoming connections from trusted peers are accepted too. When both
// sides dial at once, the link opened by the device with the smaller ID wins on both sides; a
// second process of a peer (its foreground mount beside its daemon) keeps a link of its own
// (see peer.setSession).
//
// Mounts: the daemon's node remembers its mounts and mounts them again when it starts
// (restore.go); a standalone node serves one foreground mount (ServeMount).
package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/punch"
	"github.com/peerfs/peerfs/internal/relay"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/serve"
	"github.com/peerfs/peerfs/internal/share"
	"github.com/peerfs/peerfs/internal/transport"
	"github.com/peerfs/peerfs/internal/wire"
)

// Tuning constants.
const (
	backoffMin = 500 * time.Millisecond
	backoffMax = 30 * time.Second
	// connectWait is how long a command waits for a peer that is not connected yet.
	connectWait = 10 * time.Second
	// maxLinksPerPeer bounds the links one peer may hold open at once, counted from the
	// start of their negotiation, since each costs buffers and up to rpc.MaxInFlight served
	// requests. A device needs one link, briefly two while it is replaced or after a
	// simultaneous dial; each foreground mount on the peer is a process with a link of its
	// own (and its replacement). 8 leaves room for a few of those.
	maxLinksPerPeer = 8
)

// errTooManyLinks refuses a link beyond maxLinksPerPeer.
var errTooManyLinks = fmt.Errorf("over %d links from one peer", maxLinksPerPeer)

// Options configure a Node.
type Options struct {
	Paths    config.Paths
	Identity *identity.Identity
	Listen   string // address to bind, already resolved (flag > env > config > default)
	Logger   *slog.Logger
	// Keepalive overrides the link keepalive interval (tests); 0 means rpc.DefaultKeepalive.
	Keepalive time.Duration
	// Standalone makes the node of one "peerfs mount --foreground" (see ServeMount): it
	// binds no listener, so it only dials out, and it neither remembers mounts nor restores
	// them; that is the daemon's. Listen is ignored.
	Standalone bool
	// CacheDir is the chunk cache's directory; empty means Paths.Cache/chunks.
	CacheDir string
	// RekeyBytes, RekeyAfter and RekeyLimitBytes override DefaultRekeyBytes,
	// DefaultRekeyAfter and DefaultRekeyLimitBytes (tests); 0 keeps the default.
	RekeyBytes      uint64
	RekeyAfter      time.Duration
	RekeyLimitBytes uint64
	// Discovery runs LAN discovery (discovery.go): the daemon and a foreground mount set it
	// unless --no-discovery; the config file's "discovery": false turns it off anyway.
	// DiscoveryEpoch overrides discover.DefaultEpoch and DiscoveryInterfaces names the
	// interfaces to use (tests).
	Discovery           bool
	DiscoveryEpoch      time.Duration
	DiscoveryInterfaces []string
	// KeepRelayed never opens PUNCH over a relayed link (tests: the path a symmetric NAT
	// leaves, on loopback where every punch would succeed).
	KeepRelayed bool
}

// Node is a running device.
type Node struct {
	paths config.Paths
	id    *identity.Identity
	log   *slog.Logger
	ln    net.Listener // nil for a standalone node
	// punchLn is ln, which punches connect from (punch.go); nil for a standalone node.
	punchLn     *punch.Listener
	alone       bool // Options.Standalone
	keepRelayed bool // Options.KeepRelayed
	tcfg        *transport.Config
	keep        time.Duration

	rekey   rekeyOptions  // when links are replaced (rekey.go)
	gate    handshakeGate // handshakes in progress (accept.go)
	refused *refusalLog   // refused connections, logged at a bounded rate

	runCtx context.Context // set by Run; dial loops live under it

	mu     sync.Mutex
	cfg    *config.File
	peers  map[identity.DeviceID]*peer
	shares map[string]*openShare // by share name
	nextID int                   // transfer IDs

	relays []*relayClient // configured relays, in order (relays.go)

	mounts mounts

	journals *serve.JournalStore // the journals peers' mounts apply to our shares; nil: none

	metrics metricsState // metrics.go
	disc    discovery    // discovery.go

	pairing pairState // pair.go
}

// openShare is an exported share opened for serving.
type openShare struct {
	cfg config.Share
	sh  *share.Share
}

// New loads the config file and binds the listener.
func New(opts Options) (*Node, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := config.Load(opts.Paths)
	if err != nil {
		return nil, err
	}
	n := &Node{
		paths:       opts.Paths,
		id:          opts.Identity,
		log:         opts.Logger,
		keep:        opts.Keepalive,
		alone:       opts.Standalone,
		keepRelayed: opts.KeepRelayed,
		peers:       map[identity.DeviceID]*peer{},
		shares:      map[string]*openShare{},
	}
	n.refused = newRefusalLog(opts.Logger)
	n.disc = discovery{on: opts.Discovery, epoch: opts.DiscoveryEpoch, interfaces: opts.DiscoveryInterfaces}
	n.rekey = rekeyOptions{bytes: DefaultRekeyBytes, after: DefaultRekeyAfter, limit: DefaultRekeyLimitBytes}
	if opts.RekeyBytes > 0 {
		n.rekey.bytes = opts.RekeyBytes
	}
	if opts.RekeyAfter > 0 {
		n.rekey.after = opts.RekeyAfter
	}
	if opts.RekeyLimitBytes > 0 {
		n.rekey.limit = opts.RekeyLimitBytes
	}
	n.mounts.cacheDir = opts.CacheDir
	if n.mounts.cacheDir == "" {
		n.mounts.cacheDir = filepath.Join(opts.Paths.Cache, "chunks")
	}
	if opts.Paths.Data != "" {
		if n.journals, err = serve.NewJournalStore(filepath.Join(opts.Paths.Data, "journals"), opts.Logger); err != nil {
			opts.Logger.Warn("peers' mounts will send their changes one by one", "err", err)
		}
	}
	n.tcfg = &transport.Config{Identity: opts.Identity, Trusted: n.trusted, Admitted: admitted, Unproven: n.pairUnproven}
	if !opts.Standalone {
		n.punchLn, err = listenPeers(opts.Listen)
		if n.punchLn != nil {
			n.ln = n.punchLn
		}
		if err != nil {
			return nil, fmt.Errorf("listening on %s: %w (is another daemon using the port? choose one with --listen)", opts.Listen, err)
		}
	}
	n.apply(cfg)
	return n, nil
}

// Addr returns the bound peer address; nil for a standalone node.
func (n *Node) Addr() net.Addr {
	if n.ln == nil {
		return nil
	}
	return n.ln.Addr()
}

// ID returns this device's ID.
func (n *Node) ID() identity.DeviceID { return n.id.ID }

// Run accepts and dials links until ctx is done, then unmounts and closes them all. A
// daemon's node also mounts again, in the background, what it had mounted when it last
// stopped (see restoreMounts).
func (n *Node) Run(ctx context.Context) error {
	n.mu.Lock()
	n.runCtx = ctx
	for _, p := range n.peers {
		n.startDialLocked(p)
	}
	for _, rc := range n.relays {
		n.startRelayLocked(rc)
	}
	n.mu.Unlock()

	var wg sync.WaitGroup
	if n.ln != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.acceptLoop(ctx)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.netwatchLoop(ctx)
	}()
	if !n.alone {
		n.restoreMounts(ctx)
	}
	stopDiscovery := n.startDiscovery(ctx)
	<-ctx.Done()
	stopDiscovery()
	if n.ln != nil {
		n.ln.Close()
	}
	wg.Wait()
	n.stopRelays()
	n.refused.stop()
	n.unmountAll()

	n.mu.Lock()
	peers := make([]*peer, 0, len(n.peers))
	for _, p := range n.peers {
		peers = append(peers, p)
	}
	shares := n.shares
	n.shares = map[string]*openShare{}
	n.mu.Unlock()
	for _, p := range peers {
		p.stop()
	}
	for _, s := range shares {
		s.sh.Close()
	}
	return nil
}

// trusted lists the trusted peers' device IDs.
func (n *Node) trusted() []identity.DeviceID {
	n.mu.Lock()
	defer n.mu.Unlock()
	ids := make([]identity.DeviceID, 0, len(n.peers))
	for id := range n.peers {
		ids = append(ids, id)
	}
	return ids
}

// Reload rereads the config file and applies it: new peers are dialled, removed ones
// disconnected, shares reopened.
func (n *Node) Reload(ctx context.Context) error {
	cfg, err := config.Load(n.paths)
	if err != nil {
		return err
	}
	n.apply(cfg)
	n.log.Info("configuration reloaded", "peers", len(cfg.Peers), "shares", len(cfg.Shares))
	return nil
}

// apply makes the node match cfg.
func (n *Node) apply(cfg *config.File) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cfg = cfg
	seen := map[identity.DeviceID]bool{}
	trustChanged := false
	for _, pc := range cfg.Peers {
		seen[pc.ID] = true
		p := n.peers[pc.ID]
		if p == nil {
			trustChanged = true
			p = newPeer(n, pc)
			n.peers[pc.ID] = p
			if n.runCtx != nil {
				n.startDialLocked(p)
			}
			continue
		}
		addrChanged := p.setConfig(pc)
		if addrChanged && n.runCtx != nil {
			p.stopDial()
			n.startDialLocked(p)
		}
	}
	for id, p := range n.peers {
		if !seen[id] {
			trustChanged = true
			delete(n.peers, id)
			go p.stop()
		}
	}
	before := make([]relay.URL, 0, len(n.relays))
	for _, rc := range n.relays {
		before = append(before, rc.url)
	}
	n.applyRelaysLocked(cfg.RelayURLs(), trustChanged)
	if !slices.Equal(before, cfg.RelayURLs()) {
		// A peer with no link tries the new relays at once.
		for _, p := range n.peers {
			p.kickDial()
		}
	}
	// Reopen shares whose definition changed; close removed ones.
	want := map[string]config.Share{}
	for _, s := range cfg.Shares {
		want[s.Name] = s
	}
	for name, o := range n.shares {
		w, ok := want[name]
		if !ok || w.Path != o.cfg.Path || w.ReadOnly != o.cfg.ReadOnly || w.AllowHardlinks != o.cfg.AllowHardlinks || w.Privileged != o.cfg.Privileged {
			o.sh.Close()
			delete(n.shares, name)
		} else {
			o.cfg = w
		}
	}
}

func (n *Node) startDialLocked(p *peer) {
	p.startDial(n.runCtx)
}

// shareFor returns share name if it is exported to the peer with this ID, opening it on first
// use.
func (n *Node) shareFor(id identity.DeviceID, name string) (*share.Share, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	pc := n.cfg.PeerByID(id)
	sc := n.cfg.ShareByName(name)
	if pc == nil || sc == nil || !contains(sc.Peers, pc.Name) {
		return nil, false
	}
	if o := n.shares[name]; o != nil {
		return o.sh, true
	}
	sh, err := share.OpenWith(sc.Name, sc.Path, share.Options{ReadOnly: sc.ReadOnly, AllowHardlinks: sc.AllowHardlinks})
	if err != nil {
		n.log.Error("cannot open share", "share", name, "err", err)
		return nil, false
	}
	sh.SetPrivileged(sc.Privileged)
	n.shares[name] = &openShare{cfg: *sc, sh: sh}
	return sh, true
}

func (n *Node) sharesFor(id identity.DeviceID) []wire.ShareInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []wire.ShareInfo
	for _, s := range n.cfg.SharesFor(id) {
		out = append(out, wire.ShareInfo{Name: s.Name, ReadOnly: s.ReadOnly})
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// linkPath is how a link runs.
type linkPath struct {
	kind string // api.PathDirect, api.PathPunched or api.PathRelayed
	via  string // for a relayed link, the relay's URL without its token
}

func (l linkPath) relayed() bool { return l.kind == api.PathRelayed }

// attachVia turns a verified connection into the peer's session, resolving a simultaneous
// dial. It fails when the protocol cannot be negotiated (or the peer refuses us after TLS).
func (n *Node) attachVia(conn *transport.Conn, how linkPath) error {
	return n.attachLink(conn, nil, how)
}

// attachLink is attachVia; a link dialled to replace another (rekey.go, a direct path
// replacing a relayed one) names it in replacing, and takes its place whatever the
// preference between simultaneous dials says.
func (n *Node) attachLink(conn *transport.Conn, replacing *rpc.Session, how linkPath) error {
	n.mu.Lock()
	p := n.peers[conn.Peer]
	n.mu.Unlock()
	if p == nil { // removed between handshake and now
		conn.Close()
		return errors.New("peer no longer trusted")
	}
	id := conn.Peer
	if !p.reserveLink() {
		conn.Close()
		n.refused.note(errTooManyLinks.Error(), conn.RemoteAddr().String(), fmt.Errorf("peer %s", p.name()))
		return errTooManyLinks
	}
	srv := &serve.Handler{
		Lookup:   func(name string) (*share.Share, bool) { return n.shareFor(id, name) },
		List:     func() []wire.ShareInfo { return n.sharesFor(id) },
		Logger:   n.log,
		Journals: n.journals,
	}
	use := &linkUse{path: how}
	sess, err := rpc.New(conn, rpc.Options{Handler: usageHandler{srv, use, p.servePunch}, Logger: n.log.With("peer", p.name()), Keepalive: n.keep, Name: n.name()})
	if err != nil {
		p.releaseLink()
		n.log.Warn("link negotiation failed", "peer", p.name(), "err", err)
		p.setError(err)
		return err
	}
	// The link opened by the smaller device ID wins when both sides dialled.
	preferred := conn.Outbound == (bytes.Compare(n.id.ID[:], id[:]) < 0)
	p.addUse(sess, use)
	switch {
	case replacing != nil && p.replaceSession(sess, conn, replacing):
	case replacing != nil:
		sess.Close(errors.New("the link it was to replace ended"))
		p.dropUse(sess)
		p.releaseLink()
		return errors.New("the link to replace ended meanwhile")
	case p.setSession(sess, conn, preferred):
		n.log.Info("peer connected", "peer", p.name(), "addr", conn.RemoteAddr(), "path", how.kind, "via", how.via, "outbound", conn.Outbound,
			"tls", conn.Info.Version, "cipher", conn.Info.CipherSuite, "kex", conn.Info.Group, "protocol", sess.Version())
	case conn.Outbound:
		sess.Close(errors.New("duplicate link"))
		p.dropUse(sess)
		p.releaseLink()
		return nil
	default:
		n.log.Info("peer opened another link; serving its requests on it too", "peer", p.name(), "addr", conn.RemoteAddr(), "path", how.kind)
		go p.probeCurrent()
	}
	if ctx := n.runContext(); ctx != nil {
		go p.watchKeys(ctx, sess, conn, use)
	}
	go func() {
		<-sess.Done()
		p.clearSession(sess)
		p.dropUse(sess)
		p.releaseLink()
		if p.keepTraffic(sess) {
			// A replaced link that drained (rekey.go), or one of several.
			n.log.Debug("link closed; another stays up", "peer", p.name(), "reason", sess.Err())
			return
		}
		n.log.Info("peer disconnected", "peer", p.name(), "reason", sess.Err())
	}()
	return nil
}

// runContext is Run's context, nil before Run.
func (n *Node) runContext() context.Context {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.runCtx
}

func (n *Node) name() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cfg.Name
}

// jitter spreads reconnects of many peers.
func jitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(rand.Int64N(int64(d)))
}
