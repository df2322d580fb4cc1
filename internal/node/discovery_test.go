package node_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/node"
	"github.com/peerfs/peerfs/internal/peertest"
)

// loopbackName names the loopback interface, or skips: these nodes discover each other over
// it alone, so nothing leaves the machine.
func loopbackName(t *testing.T) string {
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

func discovering(lo string) func(*node.Options) {
	return func(o *node.Options) {
		o.Discovery = true
		o.DiscoveryInterfaces = []string{lo}
	}
}

// TestDiscoverLinksPeersWithoutAddress: two trusted nodes that know no address of each other
// link through LAN discovery, and status shows the address discovered. They listen on
// 127.0.0.1 and name no interface: discovery then keeps to the loopback interface (were it
// to announce on another, it would announce an address nobody can dial, and they would
// not link).
func TestDiscoverLinksPeersWithoutAddress(t *testing.T) {
	loopbackName(t)
	on := func(o *node.Options) { o.Discovery = true }
	a := peertest.StartWith(t, "alpha", "", on)
	b := peertest.StartWith(t, "beta", "", on)
	a.Trust(b, false)
	b.Trust(a, false)
	p := waitConnected(t, a, "beta")
	q := waitConnected(t, b, "alpha")
	if p.Addr != b.Addr && q.Addr != a.Addr {
		t.Errorf("status shows alpha→beta at %q and beta→alpha at %q; want one of them at the discovered listener (%s, %s)",
			p.Addr, q.Addr, b.Addr, a.Addr)
	}
	if a.N.Discovery() == nil {
		t.Error("Discovery() is nil on a node running discovery")
	}
}

// TestDiscoverOffByConfig: with "discovery": false in the config file the node neither
// announces nor looks, so peers with no address never link.
func TestDiscoverOffByConfig(t *testing.T) {
	lo := loopbackName(t)
	off := false
	a := peertest.StartWith(t, "alpha", "", discovering(lo))
	b := peertest.StartWith(t, "beta", "", discovering(lo))
	for _, n := range []*peertest.Node{a, b} {
		n.Update(func(f *config.File) error { f.Discovery = &off; return nil })
		n.Restart()
	}
	a.Trust(b, false)
	b.Trust(a, false)
	if a.N.Discovery() != nil {
		t.Error("Discovery() is set with discovery off")
	}
	time.Sleep(3 * time.Second)
	st, err := a.N.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Peers[0].Connected {
		t.Fatalf("peers linked with discovery off: %+v", st.Peers[0])
	}
}
