package netlab

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
)

// labSeq numbers the labs of one process, for unique namespace names.
var labSeq atomic.Int64

// maxAttach is how many /30 links fit in a /24 (the first and the last are left out).
const maxAttach = 62

// New builds an empty lab: the internet namespace. It skips the test, saying why, where the
// lab cannot run (not Linux, no CAP_NET_ADMIN, no `ip` or `nft`).
func New(t TB) *Lab {
	t.Helper()
	if why := unsupported(); why != "" {
		t.Skip("netlab: " + why)
	}
	sweepStale()
	l := &Lab{t: t, prefix: fmt.Sprintf("pfl%d-%d-", os.Getpid(), labSeq.Add(1))}
	t.Cleanup(l.close)
	inet, err := l.newNS("inet")
	if err != nil {
		// The first namespace is the probe: inside a container without the right
		// privileges this is where it fails.
		t.Skipf("netlab: cannot create a network namespace (%v): run as root with CAP_NET_ADMIN and CAP_SYS_ADMIN", err)
	}
	l.inet = inet
	l.must(inet.sysctl("net.ipv4.ip_forward=1"))
	// The cut set: Cut puts address pairs in it, and the internet drops what they forward.
	l.must(inet.nft(`
table inet lab {
	set cuts { type ipv4_addr . ipv4_addr; }
	chain forward {
		type filter hook forward priority filter; policy accept;
		ip saddr . ip daddr @cuts drop
	}
}`))
	return l
}

// Internet is the namespace that routes between everything on the WAN; capture on it to see
// what crosses the internet.
func (l *Lab) Internet() *Host { return l.inet }

// Public adds a host with a public address straight on the internet (a relay, a server).
func (l *Lab) Public(name string) *Host {
	l.t.Helper()
	h, err := l.newNS(name)
	l.must(err)
	addr := l.attach(h, "eth0", netip.MustParsePrefix("203.0.113.0/24"))
	h.Iface, h.Addr, h.Public = "eth0", addr, addr
	return h
}

// Router adds a router on the internet, with a LAN of its own behind it (Router.AddHost adds
// hosts there).
func (l *Lab) Router(name string, opts RouterOptions) *Router {
	l.t.Helper()
	if opts.NAT != HomeNAT && opts.NAT != SymmetricNAT {
		l.t.Fatalf("netlab: router %s: unknown NAT %d", name, opts.NAT)
	}
	h, err := l.newNS(name)
	l.must(err)
	wan := l.attach(h, "wan0", netip.MustParsePrefix("198.51.100.0/24"))
	h.Iface, h.Addr, h.Public = "wan0", wan, wan

	l.mu.Lock()
	l.mu.lans++
	k := l.mu.lans
	l.mu.Unlock()
	if k > 254 {
		l.t.Fatal("netlab: more than 254 routers in one lab")
	}
	lan := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(k), 0, 0}), 24)
	gw := lan.Addr().Next()
	l.must(h.ip("link", "add", "name", "lan0", "type", "bridge"))
	l.must(h.ip("addr", "add", netip.PrefixFrom(gw, 24).String(), "dev", "lan0"))
	l.must(h.ip("link", "set", "lan0", "up"))
	l.must(h.sysctl("net.ipv4.ip_forward=1"))

	masq := "masquerade"
	if opts.NAT == SymmetricNAT {
		masq = "masquerade random,fully-random"
	}
	egress := ""
	if opts.OnlyHTTPS {
		egress = `
		iifname "lan0" oifname "wan0" tcp dport 443 accept
		iifname "lan0" oifname "wan0" drop`
	}
	l.must(h.nft(fmt.Sprintf(`
table inet router {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname "wan0" %s
	}
	chain input {
		type filter hook input priority filter; policy accept;
		iifname "wan0" ct state new drop
	}
	chain forward {
		type filter hook forward priority filter; policy accept;
		iifname "wan0" ct state new drop%s
	}
}`, masq, egress)))
	return &Router{Host: *h, Options: opts, LAN: lan}
}

// AddHost adds a host on r's LAN; its default route goes through r.
func (r *Router) AddHost(name string) *Host {
	l := r.Lab
	l.t.Helper()
	l.mu.Lock()
	r.hosts++
	n := r.hosts
	l.mu.Unlock()
	if n > 252 {
		l.t.Fatalf("netlab: more than 252 hosts behind router %s", r.Name)
	}
	h, err := l.newNS(name)
	l.must(err)
	gw := r.LAN.Addr().Next()
	addr := gw
	for range n {
		addr = addr.Next()
	}
	// Both ends are made in their namespaces at once: no name is ever taken in the
	// namespace the test runs in.
	port := "h" + strconv.Itoa(n)
	l.must(h.ip("link", "add", "name", "eth0", "type", "veth", "peer", "name", port, "netns", r.NS))
	l.must(h.ip("addr", "add", netip.PrefixFrom(addr, 24).String(), "dev", "eth0"))
	l.must(h.ip("link", "set", "eth0", "up"))
	l.must(h.ip("route", "add", "default", "via", gw.String()))
	l.must(r.ip("link", "set", port, "master", "lan0"))
	l.must(r.ip("link", "set", port, "up"))
	h.Iface, h.Addr, h.Public = "eth0", addr, r.Addr
	return h
}

// attach links h to the internet by a /30 from block: h's end is iface at .4k+2 with its
// default route to the internet's end, .4k+1.
func (l *Lab) attach(h *Host, iface string, block netip.Prefix) netip.Addr {
	l.t.Helper()
	l.mu.Lock()
	l.mu.attach++
	k := l.mu.attach
	l.mu.Unlock()
	if k > maxAttach {
		l.t.Fatalf("netlab: more than %d hosts and routers on one internet", maxAttach)
	}
	// Each kind of attachment counts from 1 in its block; k is shared, which only leaves
	// gaps.
	b := block.Addr().As4()
	b[3] = byte(4 * k)
	base := netip.AddrFrom4(b)
	far, near := base.Next(), base.Next().Next()
	port := "n" + strconv.Itoa(k)
	l.must(h.ip("link", "add", "name", iface, "type", "veth", "peer", "name", port, "netns", l.inet.NS))
	l.must(h.ip("addr", "add", netip.PrefixFrom(near, 30).String(), "dev", iface))
	l.must(h.ip("link", "set", iface, "up"))
	l.must(h.ip("route", "add", "default", "via", far.String()))
	l.must(l.inet.ip("addr", "add", netip.PrefixFrom(far, 30).String(), "dev", port))
	l.must(l.inet.ip("link", "set", port, "up"))
	return near
}

// Cut drops everything the internet would forward between a and b (public addresses), in
// both directions, until the returned restore is called (or the test ends). Connections
// between them are not reset: their packets vanish, as when a path dies.
func (l *Lab) Cut(a, b netip.Addr) (restore func()) {
	l.t.Helper()
	elems := fmt.Sprintf("{ %s . %s, %s . %s }", a, b, b, a)
	l.must(l.inet.nft("add element inet lab cuts " + elems))
	var done atomic.Bool
	return func() {
		if done.Swap(true) {
			return
		}
		l.must(l.inet.nft("delete element inet lab cuts " + elems))
	}
}

// newNS creates a namespace with its loopback up and IPv6 off (captures then hold only
// what the test sends).
func (l *Lab) newNS(name string) (*Host, error) {
	ns := l.prefix + name
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %v: %s", ns, err, bytes.TrimSpace(out))
	}
	l.mu.Lock()
	l.mu.namespaces = append(l.mu.namespaces, ns)
	l.mu.Unlock()
	h := &Host{Lab: l, Name: name, NS: ns}
	if err := h.ip("link", "set", "lo", "up"); err != nil {
		return nil, err
	}
	if err := h.sysctl("net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"); err != nil {
		return nil, err
	}
	return h, nil
}

// close kills what still runs in the lab's namespaces and deletes them; the links go with
// them.
func (l *Lab) close() {
	l.mu.Lock()
	nss := l.mu.namespaces
	l.mu.namespaces = nil
	l.mu.Unlock()
	for _, ns := range nss {
		killIn(ns)
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			l.t.Errorf("netlab: deleting namespace %s: %v: %s", ns, err, bytes.TrimSpace(out))
		}
	}
}

func (l *Lab) must(err error) {
	l.t.Helper()
	if err != nil {
		l.t.Fatalf("netlab: %v", err)
	}
}

// ip runs `ip -n NS args...`.
func (h *Host) ip(args ...string) error {
	return run(nil, "ip", append([]string{"-n", h.NS}, args...)...)
}

// nft loads ruleset (nft syntax) in h's namespace.
func (h *Host) nft(ruleset string) error {
	return run(strings.NewReader(ruleset), "ip", "netns", "exec", h.NS, "nft", "-f", "-")
}

// sysctl sets kernel parameters (name=value) of h's namespace.
func (h *Host) sysctl(settings ...string) error {
	var script strings.Builder
	for _, s := range settings {
		name, value, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("sysctl %q: want name=value", s)
		}
		fmt.Fprintf(&script, "echo %s > /proc/sys/%s && ", value, strings.ReplaceAll(name, ".", "/"))
	}
	script.WriteString("true")
	return run(nil, "ip", "netns", "exec", h.NS, "sh", "-c", script.String())
}

// run runs a command to completion; its error carries the command and its output.
func run(stdin *strings.Reader, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// killIn kills the processes still running in namespace ns (all started by the lab or its
// test: nothing else runs in a lab namespace).
func killIn(ns string) {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
			if p, err := os.FindProcess(pid); err == nil {
				p.Kill()
			}
		}
	}
}

// sweepStale deletes the namespaces of labs whose process is gone (a test binary killed
// before its cleanup ran), so they do not pile up.
func sweepStale() {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "pfl")
		if !ok {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || processAlive(pid) {
			continue
		}
		killIn(e.Name())
		exec.Command("ip", "netns", "del", e.Name()).Run()
	}
}
