// Package netlab builds small networks of Linux network namespaces for tests: an "internet"
// namespace that routes between public hosts and home routers, NAT routers built with
// nftables, and hosts behind them. Tests run programs inside a namespace (a command, or a Go
// function of the test binary re-executed there), capture an interface's traffic, and cut a
// path mid-test. Its job is the network, never what runs on it. Tests drive it through their
// testing.TB; a program that is not a test (peerfs-bench's reach suite) through its own TB.
//
// The lab drives iproute2 (`ip`) and nftables (`nft`) by exec; it needs CAP_NET_ADMIN. Where
// those are missing, or on other systems, New skips the test with a message saying what is
// missing. Every namespace it made is deleted when the test ends (with the links inside it),
// and the names carry the process ID and a counter, so tests in parallel packages do not
// collide.
//
// Addresses (documentation ranges on the "internet", RFC 5737; 10/8 inside):
//
//	public hosts (Public)       203.0.113.0/24, a /30 each: the host is .4k+2, the internet's end .4k+1
//	routers' WAN side (Router)  198.51.100.0/24, a /30 each, the same way
//	a router's LAN              10.k.0.0/24: the router is 10.k.0.1, its hosts 10.k.0.2 and up
//
// Topologies (what each models) are in docs/ARCHITECTURE.md, "The network lab".
package netlab

import (
	"context"
	"net/netip"
	"os"
	"sync"
)

// NAT is how a router translates its LAN hosts' connections to the internet.
type NAT int

const (
	// HomeNAT is a home router: masquerade (Linux keeps the source port when it is free, so
	// a mapping keeps the host's port and is the same for every destination) and, on the
	// WAN side, `ct state new drop` on input and forward: nothing from outside gets in
	// unless a LAN host's packet opened the way.
	HomeNAT NAT = iota + 1
	// SymmetricNAT is masquerade random,fully-random: every connection gets a random
	// public port, so the port a rendezvous saw says nothing about the next connection's.
	// The WAN-side filter is the home router's.
	SymmetricNAT
)

func (n NAT) String() string {
	switch n {
	case HomeNAT:
		return "home"
	case SymmetricNAT:
		return "symmetric"
	}
	return "nat?"
}

// RouterOptions say what kind of router Lab.Router builds.
type RouterOptions struct {
	NAT NAT
	// OnlyHTTPS lets out only TCP to port 443 (an office firewall); everything else a LAN
	// host sends to the internet is dropped.
	OnlyHTTPS bool
}

// TB is what the lab needs of the test that owns it; testing.TB has all of it. Fatal and
// Skip must not return (testing's end the test's goroutine), and Cleanup's functions run,
// last first, when the test ends.
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Skipf(format string, args ...any)
}

// Lab is one test's network. Build it with New; everything in it is deleted when the test
// ends.
type Lab struct {
	t      TB
	prefix string // of every namespace name
	inet   *Host  // the "internet": routes between attachments, holds the cut set

	mu struct {
		sync.Mutex
		namespaces []string
		attach     int // /30 links made on the internet
		lans       int // router LANs made
	}
}

// Host is a network namespace with one interface, Iface, at Addr. Public is where the
// internet sees it: Addr for a public host, its router's WAN address for a host behind a
// router.
type Host struct {
	Lab    *Lab
	Name   string
	NS     string // the namespace, for `ip netns exec`
	Iface  string
	Addr   netip.Addr
	Public netip.Addr
}

// Router is a namespace with a WAN interface ("wan0", Addr) on the internet and a LAN bridge
// ("lan0") its hosts hang off.
type Router struct {
	Host
	Options RouterOptions
	LAN     netip.Prefix

	hosts int // guarded by Lab.mu
}

// Func is a Go function the test binary runs inside a namespace (Host.Start). ctx ends when
// the parent stops the process or goes away; stdout and stderr go to the parent.
type Func func(ctx context.Context, args []string) error

var funcs = map[string]Func{}

// envFunc names the registered function a re-executed test binary runs.
const envFunc = "PEERFS_NETLAB_FUNC"

// Register names fn so that Host.Start can run it in a namespace. Call it from an init
// function or TestMain, before Main.
func Register(name string, fn Func) {
	if _, dup := funcs[name]; dup {
		panic("netlab: function registered twice: " + name)
	}
	funcs[name] = fn
}

// Main must be the first call in TestMain of a package whose tests use Host.Start: in a test
// binary started by Host.Start it runs the registered function and exits the process;
// otherwise it returns at once.
func Main() {
	name := os.Getenv(envFunc)
	if name == "" {
		return
	}
	os.Exit(runChild(name, os.Args[1:]))
}
