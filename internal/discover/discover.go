// Package discover finds trusted peers on the local network, and lets two devices meet there
// under a tag they both know, without announcing who they are.
//
// Each device announces one DNS-SD service (RFC 6763) over multicast DNS (RFC 6762) on every
// multicast interface, over IPv4 and IPv6 (link-local included):
//
//	<instance>._peerfs._tcp.local.  PTR, SRV (<host>.local., port), TXT ("v=1", tag, tag, ...)
//	<host>.local.                   A / AAAA of the interface the answer leaves by
//
// The instance and host names are random, drawn again whenever the tags change (at each
// epoch, when the trusted peers change) and when the device's addresses change. The TXT
// record holds one tag per trusted peer: Tag(PeerKey(this device, that peer, secret), epoch),
// which only the two can compute (tag.go says what a peer added by ID reveals), plus the tags
// given to AnnounceTag (a pairing rendezvous). It carries no device ID, host name, user name
// or share name. A browsing device computes the tags its trusted peers announce for it, for
// the previous, current and next epoch (clocks an epoch apart still agree), and reports
// each announcement that carries one, with the address and port it came with.
//
// Why github.com/pion/mdns/v2: it is maintained (v2.2 in 2026), joins the mDNS groups on
// every interface for both families itself, answers DNS-SD PTR, SRV and TXT questions for
// registered services (Register) and assembles browse results (Browse) with link-local IPv6
// zones set, and brings no dependency beyond golang.org/x/net. github.com/hashicorp/mdns
// (v1.0.7) was the alternative: it listens on one interface per server, its client queries
// with a fixed timeout instead of browsing, and it pulls in miekg/dns. Announcing rotating
// host names with A/AAAA records alone would have needed the port from elsewhere; SRV
// carries it.
//
// How often: a device announces its registrations unasked (announce.go), twice a second
// apart, whenever they change (at each epoch, when the trusted peers change) and when its
// sockets reopen because its addresses changed (compared every pollEvery, 2 s), so a peer
// that appears or moves is heard within about pollEvery. It asks (a PTR question, which every
// peerfs device answers) when its sockets open, 1 s and 3 s later, every rebrowseEvery (60 s),
// at each epoch, when the trusted peers change, and each second while a Lookup waits. Each
// question restarts the browse, which then reports again the announcements it had reported:
// that keeps a peer's address fresh, and recovers a lost announcement within a minute.
//
// The API, for the daemon's node and for pairing:
//
//	Start(Options) (*Service, error)            announce Options.Port, browse; Options.OnFound gets peers heard
//	(*Service).SetPeers([]Peer)                 the trusted peers (ID, pairing Secret) to announce to and look for
//	(*Service).AnnounceTag(tag) (withdraw, err) add a rendezvous tag to the announcement until withdraw()
//	(*Service).Lookup(ctx, tag) ([]netip.AddrPort, error)  wait for another device announcing tag
//	(*Service).Announcing() []string            the tags announced now
//	(*Service).Close() error
//	PeerKey(announcer, browser, secret) []byte, Tag(key, epoch) string, EpochAt(t, d) int64, CheckTag(tag) error
//
// A tag for AnnounceTag and Lookup is MinTagLen to MaxTagLen characters of [a-z0-9]; Tag's
// output is one (TagLen hexadecimal digits), so a rendezvous tag can be Tag(key, 0) with a
// key derived from the pairing code's nameplate.
//
// The package finds addresses; it never dials, and it trusts nothing it hears: a reported
// address is only a candidate for the TLS handshake, which proves the peer's device ID.
package discover

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pion/mdns/v2"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/peerfs/peerfs/internal/identity"
)

// Tuning constants.
const (
	// rebrowseEvery restarts the browse so that every announcement is reported again:
	// shorter than the 2 minutes a node keeps a LAN address after its last report.
	rebrowseEvery = 60 * time.Second
	// pollEvery is how often the interfaces and their addresses are compared, and the epoch.
	pollEvery = 2 * time.Second
	// lookupRequery is how often a Lookup asks again while it waits.
	lookupRequery = time.Second
	// lookupGather is how long a Lookup waits for more addresses after the first. A device
	// answers a query on each interface and family (A over IPv4, AAAA over IPv6) in one
	// pass, with no delay, and the query goes out on both sockets at once, so its answers
	// arrive within a millisecond or so of each other; 100 ms leaves room for a loaded
	// machine. It was most of the time "peerfs pair CODE" takes on a LAN: peerfs-bench
	// pair, to trusted, median 263.7 ms with 250 ms here, 118.1 ms with 100 ms.
	lookupGather = 100 * time.Millisecond
	// maxTagsPerInstance keeps one announcement (PTR, SRV, TXT, address) within a
	// 1280-byte IPv6 minimum MTU packet: 40 tags of 17 bytes are 680 bytes of TXT.
	// More tags are spread over more instances.
	maxTagsPerInstance = 40
)

// requeryAfterOpen are the moments after the sockets open when the browse asks again.
var requeryAfterOpen = []time.Duration{time.Second, 3 * time.Second}

// ErrClosed is returned by the calls of a closed Service.
var ErrClosed = errors.New("discovery stopped")

// Peer is a trusted device to look for, and to announce to.
type Peer struct {
	ID identity.DeviceID
	// Secret is the pairing secret shared with it (config.Peer.Secret); nil for a peer added
	// by device ID.
	Secret []byte
}

// Found is an announcement of a trusted peer heard on the LAN.
type Found struct {
	Peer identity.DeviceID
	Tag  string
	Addr netip.AddrPort // an IPv6 link-local address carries its zone
}

// Options configure a Service.
type Options struct {
	// Self is this device's ID; with each peer's it keys the tags.
	Self identity.DeviceID
	// Port is the TCP port peers reach this device at (its listener's). 0 announces nothing:
	// the service only browses (a foreground mount's node).
	Port uint16
	// OnFound is called for each trusted peer heard and each address it was heard at, again
	// when it is heard again (at least every rebrowseEvery while it announces). It may be
	// called from several goroutines at once and must not block.
	OnFound func(Found)
	// Logger gets what the service does, at debug level; nil discards it.
	Logger *slog.Logger
	// Addr, when valid, is the only address announced (a listener bound to one address);
	// the zero Addr announces, on each interface, an address of that interface.
	Addr netip.Addr
	// Interfaces names the interfaces to use; nil means every interface that is up and
	// multicast-capable, neither loopback nor point-to-point. Tests name "lo".
	Interfaces []string
	// Epoch is how long a peer tag lasts; 0 means DefaultEpoch. Both sides must agree: it
	// is shortened only in tests.
	Epoch time.Duration
	// Now is the clock for epochs; nil means time.Now.
	Now func() time.Time
}

// Service announces this device's tags and browses for its peers' until Close.
type Service struct {
	opts Options
	log  *slog.Logger

	wake     chan struct{} // capacity 1: something changed, run a step now
	done     chan struct{} // closed by Close
	loopDone chan struct{}

	mu struct {
		sync.Mutex
		peers      []Peer
		extra      map[string]int // tags given to AnnounceTag, by count of callers
		lookups    map[string][]chan netip.AddrPort
		want       map[string]identity.DeviceID // tags our peers announce for us, this epoch ±1
		wantEpoch  int64
		own        map[string]bool // instance names we announce: never reported
		rebrowse   bool            // restart the browse at the next step
		reannounce bool            // send the announcement again at the next step
		closed     bool
		lastErr    string // last failure to open, logged once
		announcing []string
		// taken counts the steps that read the state above; done is the last of them that
		// finished, and stepped is closed and replaced when one does (withdraw waits on it).
		taken, done uint64
		stepped     chan struct{}
	}
}

// Start begins announcing and browsing; the first step runs in the background.
func Start(opts Options) (*Service, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Epoch <= 0 {
		opts.Epoch = DefaultEpoch
	}
	s := &Service{opts: opts, log: opts.Logger, wake: make(chan struct{}, 1), done: make(chan struct{}), loopDone: make(chan struct{})}
	s.mu.extra = map[string]int{}
	s.mu.lookups = map[string][]chan netip.AddrPort{}
	s.mu.own = map[string]bool{}
	s.mu.stepped = make(chan struct{})
	s.mu.wantEpoch = EpochAt(opts.Now(), opts.Epoch)
	s.mu.want = s.wantLocked(s.mu.wantEpoch)
	go s.runLoop()
	return s, nil
}

// SetPeers replaces the trusted peers: their tags are announced and looked for from now
// on, and the network is asked again at once.
func (s *Service) SetPeers(peers []Peer) {
	s.mu.Lock()
	s.mu.peers = slices.Clone(peers)
	s.mu.want = s.wantLocked(s.mu.wantEpoch)
	s.mu.rebrowse = true
	s.mu.Unlock()
	s.poke()
}

// AnnounceTag adds tag to this device's announcement, with its port, until withdraw is called
// (once). A pairing rendezvous uses it: the tag is derived from what both users know.
func (s *Service) AnnounceTag(tag string) (withdraw func(), err error) {
	if err := CheckTag(tag); err != nil {
		return nil, err
	}
	if s.opts.Port == 0 {
		return nil, errors.New("this discovery service announces nothing (it has no listening port): start the daemon")
	}
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.mu.extra[tag]++
	s.mu.Unlock()
	s.poke()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.mu.extra[tag]--; s.mu.extra[tag] <= 0 {
				delete(s.mu.extra, tag)
			}
			next := s.mu.taken + 1
			s.mu.Unlock()
			s.poke()
			s.waitStep(next, withdrawWait)
		})
	}, nil
}

// withdrawWait bounds how long withdraw waits for the loop to stop announcing the tag.
const withdrawWait = 5 * time.Second

// waitStep waits until step n (counted from the start, as it reads the state) has finished,
// the service closes, or d passes: a tag withdrawn is then no longer registered, and a lookup
// made next does not find it here.
func (s *Service) waitStep(n uint64, d time.Duration) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		done, ch := s.mu.done, s.mu.stepped
		s.mu.Unlock()
		if done >= n {
			return
		}
		select {
		case <-ch:
		case <-s.done:
			return
		case <-deadline.C:
			return
		}
	}
}

// Lookup asks the network for an announcement carrying tag until one is heard or ctx ends,
// and returns the addresses (with the announced port) heard within lookupGather of the first.
// The device's own announcements are never returned.
func (s *Service) Lookup(ctx context.Context, tag string) ([]netip.AddrPort, error) {
	if err := CheckTag(tag); err != nil {
		return nil, err
	}
	ch := make(chan netip.AddrPort, 16)
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.mu.lookups[tag] = append(s.mu.lookups[tag], ch)
	s.mu.rebrowse = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.mu.lookups[tag] = slices.DeleteFunc(s.mu.lookups[tag], func(c chan netip.AddrPort) bool { return c == ch })
		if len(s.mu.lookups[tag]) == 0 {
			delete(s.mu.lookups, tag)
		}
		s.mu.Unlock()
	}()
	s.poke()
	requery := time.NewTicker(lookupRequery)
	defer requery.Stop()
	var out []netip.AddrPort
	for len(out) == 0 {
		select {
		case a := <-ch:
			out = append(out, a)
		case <-requery.C:
			s.requery()
		case <-ctx.Done():
			return nil, fmt.Errorf("no device announced the tag on the local network: %w", ctx.Err())
		case <-s.done:
			return nil, ErrClosed
		}
	}
	gather := time.NewTimer(lookupGather)
	defer gather.Stop()
	for {
		select {
		case a := <-ch:
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		case <-gather.C:
			return out, nil
		case <-ctx.Done():
			return out, nil
		}
	}
}

// Announcing returns the tags announced now, sorted (tests, status).
func (s *Service) Announcing() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mu.announcing)
}

// Close stops announcing and browsing and releases the sockets.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.mu.Unlock()
	close(s.done)
	<-s.loopDone
	return nil
}

func (s *Service) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// wantLocked maps the tags our peers announce for us in epoch ±epochSkew to the peer.
func (s *Service) wantLocked(epoch int64) map[string]identity.DeviceID {
	want := make(map[string]identity.DeviceID, len(s.mu.peers)*(2*epochSkew+1))
	for _, p := range s.mu.peers {
		key := PeerKey(p.ID, s.opts.Self, p.Secret)
		for d := int64(-epochSkew); d <= epochSkew; d++ {
			want[Tag(key, epoch+d)] = p.ID
		}
	}
	return want
}

// announceTagsLocked is what this device announces in epoch, sorted.
func (s *Service) announceTagsLocked(epoch int64) []string {
	if s.opts.Port == 0 {
		return nil
	}
	tags := make([]string, 0, len(s.mu.peers)+len(s.mu.extra))
	for _, p := range s.mu.peers {
		tags = append(tags, Tag(PeerKey(s.opts.Self, p.ID, p.Secret), epoch))
	}
	for t := range s.mu.extra {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	return slices.Compact(tags)
}

// state is what the run loop owns: the open mDNS connection and what it announces.
type state struct {
	conn      *mdns.Conn
	ann       *announcer      // nil when its sockets could not be bound
	ifs       []net.Interface // what conn was opened on
	fp        string          // interfaces and addresses conn was opened on
	epoch     int64
	regs      []registration // registered instances
	tags      []string       // announced tags
	browse    context.CancelFunc
	browsedAt time.Time
}

func (st *state) close() {
	if st.browse != nil {
		st.browse()
		st.browse = nil
	}
	if st.conn != nil {
		st.conn.Close()
		st.conn = nil
	}
	if st.ann != nil {
		st.ann.goodbye(st.ifs, st.regs)
		st.ann.close()
		st.ann = nil
	}
	st.regs, st.tags = nil, nil
}

// runLoop steps at every poll and whenever poked, until Close.
func (s *Service) runLoop() {
	defer close(s.loopDone)
	var st state
	defer st.close()
	poll := time.NewTicker(pollEvery)
	defer poll.Stop()
	for {
		n := s.step(&st)
		s.mu.Lock()
		s.mu.done = n
		close(s.mu.stepped)
		s.mu.stepped = make(chan struct{})
		s.mu.Unlock()
		select {
		case <-s.done:
			return
		case <-poll.C:
		case <-s.wake:
		}
	}
}

// step makes the connection match the interfaces, the epoch, the tags and the browse
// schedule, and returns its number (Service.mu.taken).
func (s *Service) step(st *state) (n uint64) {
	s.mu.Lock()
	s.mu.taken++
	n = s.mu.taken
	s.mu.Unlock()
	now := s.opts.Now()
	epoch := EpochAt(now, s.opts.Epoch)
	ifs, fp, err := s.interfaces()
	if err != nil {
		s.log.Debug("discovery: listing interfaces", "err", err)
		return n
	}
	s.mu.Lock()
	if epoch != s.mu.wantEpoch {
		s.mu.wantEpoch = epoch
		s.mu.want = s.wantLocked(epoch)
	}
	tags := s.announceTagsLocked(epoch)
	rebrowse, reannounce := s.mu.rebrowse, s.mu.reannounce
	s.mu.rebrowse, s.mu.reannounce = false, false
	s.mu.Unlock()

	if st.conn == nil || fp != st.fp {
		st.close()
		st.fp = fp
		if len(ifs) == 0 {
			s.noteOpen(errors.New("no multicast interface is up"))
			return
		}
		conn, err := s.open(ifs)
		if err != nil {
			s.noteOpen(err)
			return
		}
		s.noteOpen(nil)
		st.conn, st.ifs = conn, ifs
		if st.ann, err = openAnnouncer(); err != nil {
			s.log.Debug("discovery: peers hear this device when they ask, not before", "err", err)
		}
		conn.OnServiceDiscovered(s.heard)
		s.log.Debug("discovery: listening", "interfaces", len(ifs))
		rebrowse = true
		// Ask again shortly: a peer whose sockets were reopening at the same moment (its
		// network changed too) missed the first question.
		for _, d := range requeryAfterOpen {
			time.AfterFunc(d, s.requery)
		}
	}
	if epoch != st.epoch {
		st.epoch = epoch
		rebrowse = true
	}
	if !slices.Equal(tags, st.tags) || (len(tags) > 0 && st.regs == nil) {
		s.announce(st, tags)
		if len(st.regs) > 0 {
			s.sendAnnouncement(st)
			// Twice, a second apart (RFC 6762 section 8.3): one may be lost.
			time.AfterFunc(time.Second, func() {
				s.mu.Lock()
				s.mu.reannounce = true
				s.mu.Unlock()
				s.poke()
			})
		}
	} else if reannounce {
		s.sendAnnouncement(st)
	}
	if rebrowse || st.browse == nil || now.Sub(st.browsedAt) >= rebrowseEvery {
		if st.browse != nil {
			st.browse()
		}
		ctx, cancel := context.WithCancel(context.Background())
		if err := st.conn.Browse(ctx, ServiceType); err != nil {
			cancel()
			s.log.Debug("discovery: browsing", "err", err)
			return
		}
		st.browse, st.browsedAt = cancel, now
	}
	return n
}

// requery restarts the browse at the next step, which asks at once.
func (s *Service) requery() {
	s.mu.Lock()
	s.mu.rebrowse = true
	s.mu.Unlock()
	s.poke()
}

// noteOpen logs a failure to open the sockets once, until it changes or ends.
func (s *Service) noteOpen(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	s.mu.Lock()
	changed := msg != s.mu.lastErr
	s.mu.lastErr = msg
	s.mu.Unlock()
	if changed && err != nil {
		s.log.Info("LAN discovery is paused: it retries when the network changes", "err", err)
	}
}

// announce registers tags under fresh random instance and host names and withdraws the
// previous ones. The host name is answered for in the PTR answer's additional records (and
// the SRV answer's), which is where browsers take the address from; a direct A or AAAA
// question for it goes unanswered, which tells nobody anything.
func (s *Service) announce(st *state, tags []string) {
	old := st.regs
	var regs []registration
	for chunk := range slices.Chunk(tags, maxTagsPerInstance) {
		text := make([]mdns.TXTEntry, 0, len(chunk)+1)
		text = append(text, mdns.NewTXTString("v", "1"))
		raw := []string{"v=1"}
		for _, t := range chunk {
			text = append(text, mdns.NewTXTFlag(t))
			raw = append(raw, t)
		}
		r := registration{instance: randomLabel(), host: randomLabel() + ".local", text: raw}
		svc := mdns.ServiceInstance{Instance: r.instance, Service: ServiceType, Domain: "local", Host: r.host + ".",
			Port: s.opts.Port, Text: text}
		if err := st.conn.Register(svc); err != nil {
			s.log.Debug("discovery: announcing", "err", err)
			continue
		}
		regs = append(regs, r)
	}
	for _, r := range old {
		st.conn.Unregister(r.instance, ServiceType)
	}
	if st.ann != nil {
		if err := st.ann.goodbye(st.ifs, old); err != nil {
			s.log.Debug("discovery: withdrawing the previous announcement", "err", err)
		}
	}
	s.mu.Lock()
	for _, r := range old {
		delete(s.mu.own, r.instance)
	}
	for _, r := range regs {
		s.mu.own[r.instance] = true
	}
	s.mu.announcing = slices.Clone(tags)
	s.mu.Unlock()
	st.regs, st.tags = regs, slices.Clone(tags)
	s.log.Debug("discovery: announcing", "tags", len(tags))
}

// sendAnnouncement sends the registrations unasked (announce.go).
func (s *Service) sendAnnouncement(st *state) {
	if st.ann == nil || len(st.regs) == 0 {
		return
	}
	if err := st.ann.send(st.ifs, s.opts.Addr, s.opts.Port, st.regs); err != nil {
		s.log.Debug("discovery: sending the announcement", "err", err)
	}
}

// heard is called by the mDNS connection for each complete announcement of the service type.
func (s *Service) heard(ev mdns.ServiceEvent) {
	if !strings.EqualFold(ev.Instance.Service, ServiceType) || !ev.Addr.IsValid() || ev.Instance.Port == 0 {
		return
	}
	addr := netip.AddrPortFrom(ev.Addr, ev.Instance.Port)
	var found []Found
	s.mu.Lock()
	if s.mu.own[ev.Instance.Instance] {
		s.mu.Unlock()
		return
	}
	for _, e := range ev.Instance.Text {
		if e.Value != nil {
			continue
		}
		tag := strings.ToLower(e.Key)
		if id, ok := s.mu.want[tag]; ok {
			found = append(found, Found{Peer: id, Tag: tag, Addr: addr})
		}
		for _, ch := range s.mu.lookups[tag] {
			select {
			case ch <- addr:
			default:
			}
		}
	}
	s.mu.Unlock()
	for _, f := range found {
		s.log.Debug("discovery: heard a peer", "peer", f.Peer.Short(), "addr", f.Addr)
		if s.opts.OnFound != nil {
			s.opts.OnFound(f)
		}
	}
}

// open binds the mDNS sockets (port 5353, shared with other responders on the host) and
// joins the groups on ifs.
func (s *Service) open(ifs []net.Interface) (*mdns.Conn, error) {
	var pc4 *ipv4.PacketConn
	var pc6 *ipv6.PacketConn
	// A multicast address makes Go bind the wildcard address with SO_REUSEADDR, so other
	// mDNS responders on the host (avahi, another process of ours) keep working.
	l4, err4 := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353})
	if err4 == nil {
		pc4 = ipv4.NewPacketConn(l4)
	}
	l6, err6 := net.ListenUDP("udp6", &net.UDPAddr{IP: net.ParseIP("ff02::fb"), Port: 5353})
	if err6 == nil {
		pc6 = ipv6.NewPacketConn(l6)
	}
	if pc4 == nil && pc6 == nil {
		return nil, fmt.Errorf("binding the mDNS port 5353: %w", errors.Join(err4, err6))
	}
	loopback := slices.ContainsFunc(ifs, func(i net.Interface) bool { return i.Flags&net.FlagLoopback != 0 })
	opts := []mdns.ServerOption{
		mdns.WithName("peerfs"),
		mdns.WithInterfaces(ifs...),
		mdns.WithIncludeLoopback(loopback),
		// The browse is restarted (and asks) every rebrowseEvery; pion's own repeat, at a
		// fixed interval with no back-off, never comes first.
		mdns.WithQueryInterval(2 * rebrowseEvery),
		mdns.WithLoggerFactory(pionLogs{s.log}),
	}
	if s.opts.Addr.IsValid() {
		opts = append(opts, mdns.WithLocalAddress(net.IP(s.opts.Addr.AsSlice())))
	}
	conn, err := mdns.NewServer(pc4, pc6, opts...)
	if err != nil {
		if l4 != nil {
			l4.Close()
		}
		if l6 != nil {
			l6.Close()
		}
		return nil, fmt.Errorf("starting mDNS: %w", err)
	}
	return conn, nil
}

// interfaces lists the interfaces to use and a fingerprint of them and their addresses,
// which changes when an address does.
func (s *Service) interfaces() ([]net.Interface, string, error) {
	all, err := net.Interfaces()
	if err != nil {
		return nil, "", err
	}
	var out []net.Interface
	var fp strings.Builder
	for _, ifi := range all {
		if s.opts.Interfaces != nil {
			if !slices.Contains(s.opts.Interfaces, ifi.Name) || ifi.Flags&net.FlagUp == 0 {
				continue
			}
		} else if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagMulticast == 0 ||
			ifi.Flags&(net.FlagLoopback|net.FlagPointToPoint) != 0 {
			continue
		}
		addrs, err := ifi.Addrs()
		if err != nil || len(addrs) == 0 {
			continue
		}
		out = append(out, ifi)
		fmt.Fprintf(&fp, "%d %s %v", ifi.Index, ifi.Name, ifi.Flags)
		for _, a := range addrs {
			fp.WriteString(" " + a.String())
		}
		fp.WriteString("\n")
	}
	return out, fp.String(), nil
}

// randomLabel is a fresh random DNS label: 12 lower-case hexadecimal digits (48 bits).
func randomLabel() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
