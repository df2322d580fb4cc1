package discover

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// loopback returns the name of the loopback interface, or skips: the services of a test
// talk over it alone, so nothing leaves the machine.
func loopback(t *testing.T) string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Skipf("listing interfaces: %v", err)
	}
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagLoopback != 0 && ifi.Flags&net.FlagUp != 0 {
			return ifi.Name
		}
	}
	t.Skip("no loopback interface is up")
	return ""
}

// founds collects a service's reports.
type founds struct {
	mu  sync.Mutex
	got []Found
	new chan struct{}
}

func newFounds() *founds { return &founds{new: make(chan struct{}, 1)} }

func (f *founds) add(x Found) {
	f.mu.Lock()
	f.got = append(f.got, x)
	f.mu.Unlock()
	select {
	case f.new <- struct{}{}:
	default:
	}
}

// wait returns the first report that satisfies ok, failing after d.
func (f *founds) wait(t *testing.T, d time.Duration, what string, ok func(Found) bool) Found {
	t.Helper()
	deadline := time.After(d)
	for {
		f.mu.Lock()
		for _, x := range f.got {
			if ok(x) {
				f.mu.Unlock()
				return x
			}
		}
		f.mu.Unlock()
		select {
		case <-f.new:
		case <-deadline:
			t.Fatalf("%s: not heard within %v", what, d)
		}
	}
}

func startService(t *testing.T, opts Options) *Service {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestDiscoverPeersOnLoopback: two devices that trust each other each hear the other's
// announcement, with its port; a device that trusts neither hears nothing.
func TestDiscoverPeersOnLoopback(t *testing.T) {
	lo := loopback(t)
	a, b, c := testID(1), testID(2), testID(3)
	fa, fb, fc := newFounds(), newFounds(), newFounds()
	sa := startService(t, Options{Self: a, Port: 7001, OnFound: fa.add, Interfaces: []string{lo}})
	sb := startService(t, Options{Self: b, Port: 7002, OnFound: fb.add, Interfaces: []string{lo}})
	startService(t, Options{Self: c, Port: 7003, OnFound: fc.add, Interfaces: []string{lo}})
	secret := []byte("paired")
	sa.SetPeers([]Peer{{ID: b, Secret: secret}})
	sb.SetPeers([]Peer{{ID: a, Secret: secret}})

	got := fa.wait(t, 10*time.Second, "a hearing b", func(f Found) bool { return f.Peer == b })
	if got.Addr.Port() != 7002 || !got.Addr.Addr().IsLoopback() {
		t.Errorf("a heard b at %v, want a loopback address with port 7002", got.Addr)
	}
	got = fb.wait(t, 10*time.Second, "b hearing a", func(f Found) bool { return f.Peer == a })
	if got.Addr.Port() != 7001 {
		t.Errorf("b heard a at %v, want port 7001", got.Addr)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.got) != 0 {
		t.Errorf("a device trusting nobody reported %v", fc.got)
	}
}

// TestDiscoverNeedsTheSecret: a peer that holds another secret (or none) computes other tags
// and does not recognise the announcement.
func TestDiscoverNeedsTheSecret(t *testing.T) {
	lo := loopback(t)
	a, b := testID(1), testID(2)
	fb := newFounds()
	sa := startService(t, Options{Self: a, Port: 7001, Interfaces: []string{lo}})
	sb := startService(t, Options{Self: b, Port: 7002, OnFound: fb.add, Interfaces: []string{lo}})
	sa.SetPeers([]Peer{{ID: b, Secret: []byte("one")}})
	sb.SetPeers([]Peer{{ID: a, Secret: []byte("another")}})
	// A lookup of a's actual tag proves the announcement is on the wire meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tag := Tag(PeerKey(a, b, []byte("one")), EpochAt(time.Now(), 0))
	if _, err := sb.Lookup(ctx, tag); err != nil {
		t.Fatalf("a's announcement was not heard: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if len(fb.got) != 0 {
		t.Errorf("b recognised a without the right secret: %v", fb.got)
	}
}

// TestAnnounceAndLookupTag: a tag announced by one device is found by another, with the
// announcer's port; the announcer does not find itself; after withdraw nobody does.
func TestAnnounceAndLookupTag(t *testing.T) {
	lo := loopback(t)
	sa := startService(t, Options{Self: testID(1), Port: 7101, Interfaces: []string{lo}})
	sb := startService(t, Options{Self: testID(2), Interfaces: []string{lo}})
	tag := testTag("rendezvous")
	withdraw, err := sa.AnnounceTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := sb.Lookup(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) == 0 || addrs[0].Port() != 7101 {
		t.Fatalf("Lookup = %v, want the announcer's port 7101", addrs)
	}

	short, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	if addrs, err := sa.Lookup(short, tag); err == nil {
		t.Errorf("the announcer found its own announcement at %v", addrs)
	}

	withdraw() // returns once the announcer's loop has unregistered the tag
	// Answers sa sent before that may still be on their way to sb.
	time.Sleep(300 * time.Millisecond)
	short, cancel3 := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel3()
	if addrs, err := sb.Lookup(short, tag); err == nil {
		t.Errorf("a withdrawn tag was found at %v", addrs)
	}
}

// TestBrowseOnlyAnnouncesNothing: a service without a port (a foreground mount) finds its
// peers but is not found, and refuses AnnounceTag.
func TestBrowseOnlyAnnouncesNothing(t *testing.T) {
	lo := loopback(t)
	a, b := testID(1), testID(2)
	fa, fb := newFounds(), newFounds()
	sa := startService(t, Options{Self: a, OnFound: fa.add, Interfaces: []string{lo}})
	sb := startService(t, Options{Self: b, Port: 7202, OnFound: fb.add, Interfaces: []string{lo}})
	sa.SetPeers([]Peer{{ID: b}})
	sb.SetPeers([]Peer{{ID: a}})
	fa.wait(t, 10*time.Second, "the browse-only device hearing its peer", func(f Found) bool { return f.Peer == b })
	if got := sa.Announcing(); len(got) != 0 {
		t.Errorf("browse-only service announces %v", got)
	}
	if _, err := sa.AnnounceTag("abcdefgh"); err == nil {
		t.Error("AnnounceTag on a browse-only service succeeded")
	}
	time.Sleep(time.Second)
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if len(fb.got) != 0 {
		t.Errorf("the browse-only device was heard: %v", fb.got)
	}
}

// TestTagsRotateAcrossEpochs: with three-second epochs, the announced tag changes with the
// epoch and the peer is still recognised under each.
func TestTagsRotateAcrossEpochs(t *testing.T) {
	lo := loopback(t)
	a, b := testID(1), testID(2)
	fb := newFounds()
	const epoch = 3 * time.Second
	sa := startService(t, Options{Self: a, Port: 7301, Interfaces: []string{lo}, Epoch: epoch})
	sb := startService(t, Options{Self: b, Port: 7302, OnFound: fb.add, Interfaces: []string{lo}, Epoch: epoch})
	sa.SetPeers([]Peer{{ID: b}})
	sb.SetPeers([]Peer{{ID: a}})
	first := fb.wait(t, 10*time.Second, "first tag", func(f Found) bool { return f.Peer == a })
	second := fb.wait(t, 4*epoch, "a later tag", func(f Found) bool { return f.Peer == a && f.Tag != first.Tag })
	if first.Tag == second.Tag {
		t.Fatal("the tag did not change")
	}
	want := map[string]bool{}
	for _, tag := range sa.Announcing() {
		want[tag] = true
	}
	if len(want) != 1 {
		t.Errorf("a announces %d tags for one peer, want 1", len(want))
	}
}

// TestAnnounceGivenAddress: a device whose listener is bound to one address announces that
// address, not the interface's first.
func TestAnnounceGivenAddress(t *testing.T) {
	lo := loopback(t)
	want := netip.MustParseAddr("127.0.0.2")
	sa := startService(t, Options{Self: testID(1), Port: 7401, Addr: want, Interfaces: []string{lo}})
	sb := startService(t, Options{Self: testID(2), Interfaces: []string{lo}})
	tag := testTag("givenaddress")
	withdraw, err := sa.AnnounceTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	defer withdraw()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := sb.Lookup(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	if addrs[0] != netip.AddrPortFrom(want, 7401) {
		t.Errorf("found at %v, want %v", addrs, netip.AddrPortFrom(want, 7401))
	}
}

// TestLateDeviceIsHeardUnasked: a device that starts after its peer stopped asking is heard at
// once, by its announcement, not at the peer's next question a minute later.
func TestLateDeviceIsHeardUnasked(t *testing.T) {
	lo := loopback(t)
	a, b := testID(1), testID(2)
	fa := newFounds()
	sa := startService(t, Options{Self: a, Port: 7501, OnFound: fa.add, Interfaces: []string{lo}})
	sa.SetPeers([]Peer{{ID: b}})
	// Past the questions a asks after opening (1 s and 3 s).
	time.Sleep(4 * time.Second)
	started := time.Now()
	sb := startService(t, Options{Self: b, Port: 7502, Interfaces: []string{lo}})
	sb.SetPeers([]Peer{{ID: a}})
	fa.wait(t, 5*time.Second, "a hearing b, which started late", func(f Found) bool { return f.Peer == b })
	t.Logf("heard %v after b started", time.Since(started).Round(time.Millisecond))
}

// TestGoodbyeOnClose: a service that stops withdraws its announcement (a PTR record with a
// TTL of zero), so that browsers drop it at once.
func TestGoodbyeOnClose(t *testing.T) {
	lo := loopback(t)
	ifi, err := net.InterfaceByName(lo)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenMulticastUDP("udp4", ifi, &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353})
	if err != nil {
		t.Skipf("joining the mDNS group on %s: %v", lo, err)
	}
	defer c.Close()
	s, err := Start(Options{Self: testID(1), Port: 7601, Interfaces: []string{lo}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; len(s.Announcing()) == 0 && i < 200; i++ {
		s.SetPeers([]Peer{{ID: testID(2)}})
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	s.Close()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 9000)
	for {
		n, _, err := c.ReadFrom(buf)
		if err != nil {
			t.Fatalf("no goodbye after Close: %v", err)
		}
		var m dnsmessage.Message
		if m.Unpack(buf[:n]) != nil || !m.Header.Response {
			continue
		}
		for _, a := range m.Answers {
			if a.Header.Type == dnsmessage.TypePTR && a.Header.TTL == 0 && a.Header.Name.String() == ServiceType+".local." {
				return
			}
		}
	}
}
