package main_test

// LAN discovery between real daemons, each in a network namespace of its own on one bridge
// (internal/netlab): no address configured, IPv4 and IPv6-link-local-only networks.

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/discover"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/netlab"
)

// labEpoch is the discovery epoch the lab's daemons use, so tags change during a test.
const labEpoch = 4 * time.Second

// labDevice is a peerfs home whose daemon runs in a lab namespace.
type labDevice struct {
	name string
	home string
	host *netlab.Host
	id   identity.DeviceID
	cmd  *exec.Cmd
	done chan struct{}
}

func newLabDevice(t *testing.T, host *netlab.Host, name string) *labDevice {
	t.Helper()
	d := &labDevice{name: name, home: filepath.Join(t.TempDir(), name), host: host}
	must(t, d.home, "init", "--name", name)
	id, err := identity.ParseDeviceID(strings.TrimSpace(must(t, d.home, "id")))
	if err != nil {
		t.Fatal(err)
	}
	d.id = id
	return d
}

// start runs the daemon in the device's namespace, listening on every address, logging at
// debug level to home.log.
func (d *labDevice) start(t *testing.T) {
	t.Helper()
	d.cmd = d.host.Command(bin, "--home", d.home, "--verbose", "daemon", "--listen", ":7462",
		"--discovery-epoch", labEpoch.String())
	logf, err := os.OpenFile(d.home+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = logf
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.done = make(chan struct{})
	go func() {
		d.cmd.Wait()
		logf.Close()
		close(d.done)
	}()
	t.Cleanup(func() { d.stop() })
}

func (d *labDevice) stop() {
	if d.cmd == nil {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
	}
	d.cmd = nil
}

func (d *labDevice) logText() string {
	b, _ := os.ReadFile(d.home + ".log")
	return string(b)
}

// peerState is what "peerfs status --json" says of one peer.
type peerState struct {
	Name      string `json:"name"`
	Addr      string `json:"addr"`
	Connected bool   `json:"connected"`
}

func (d *labDevice) peer(t *testing.T, name string) (peerState, bool) {
	t.Helper()
	out, _, code := peerfs(t, d.home, "status", "--json")
	if code != 0 {
		return peerState{}, false
	}
	var st struct{ Peers []peerState }
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	for _, p := range st.Peers {
		if p.Name == name {
			return p, true
		}
	}
	return peerState{}, false
}

// waitLinked waits until d sees peer connected from an address that ok accepts, and returns
// that address.
func (d *labDevice) waitLinked(t *testing.T, peer string, within time.Duration, ok func(netip.Addr) bool) netip.AddrPort {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if p, found := d.peer(t, peer); found && p.Connected {
			if ap, err := netip.ParseAddrPort(p.Addr); err == nil && ok(ap.Addr().WithZone("")) {
				return ap
			}
		}
		if time.Now().After(deadline) {
			p, _ := d.peer(t, peer)
			t.Fatalf("%s: %s not linked within %v (status %+v); log:\n%s", d.name, peer, within, p, tail(d.logText(), 40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// linkLocal returns the IPv6 link-local address of the host's interface, waiting for it.
func linkLocal(t *testing.T, h *netlab.Host) netip.Addr {
	t.Helper()
	for range 100 {
		out := h.Run("ip", "-6", "-o", "addr", "show", "dev", h.Iface, "scope", "link")
		for _, f := range strings.Fields(out) {
			if p, err := netip.ParsePrefix(f); err == nil && p.Addr().IsLinkLocalUnicast() && !strings.Contains(out, "tentative") {
				return p.Addr()
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s has no IPv6 link-local address", h.Name)
	return netip.Addr{}
}

// ipv6LinkLocalOnly turns IPv6 on in h (the lab turns it off) without duplicate address
// detection, and removes its IPv4 address: the host keeps only its link-local address.
func ipv6LinkLocalOnly(t *testing.T, h *netlab.Host) netip.Addr {
	t.Helper()
	h.Run("sysctl", "-q", "-w", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
		"net.ipv6.conf."+h.Iface+".accept_dad=0")
	h.Run("sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=0", "net.ipv6.conf.default.disable_ipv6=0",
		"net.ipv6.conf."+h.Iface+".disable_ipv6=0", "net.ipv6.conf.lo.disable_ipv6=0")
	h.Run("ip", "-4", "addr", "flush", "dev", h.Iface)
	return linkLocal(t, h)
}

func TestDiscoverLabIPv4(t *testing.T)          { discoverLab(t, false) }
func TestDiscoverLabIPv6LinkLocal(t *testing.T) { discoverLab(t, true) }

// discoverLab: two trusted daemons on one bridge, no address configured, link within a few
// seconds over the address discovery found; a capture of everything on the bridge holds no
// device ID, device, host, share or user name, and the announced tags change with the epoch;
// a stranger's TLS connection gets no certificate; a daemon that moves to a new address is
// heard there again within 10 s and linked there again.
func discoverLab(t *testing.T, v6 bool) {
	if testing.Short() {
		t.Skip("network namespaces and real daemons: skipped in -short")
	}
	lab := netlab.New(t)
	r := lab.Router("r", netlab.RouterOptions{NAT: netlab.HomeNAT})
	// Multicast floods the bridge: no snooping querier runs in the lab.
	r.Run("ip", "link", "set", "lan0", "type", "bridge", "mcast_snooping", "0")
	ha, hb, hc := r.AddHost("a"), r.AddHost("b"), r.AddHost("c")
	addrA, addrB := ha.Addr, hb.Addr
	if v6 {
		addrA, addrB = ipv6LinkLocalOnly(t, ha), ipv6LinkLocalOnly(t, hb)
	}

	a := newLabDevice(t, ha, "alicelaptop")
	b := newLabDevice(t, hb, "bobdesktop")
	must(t, a.home, "peer", "add", b.id.String(), "--name", "bobdesktop")
	must(t, b.home, "peer", "add", a.id.String(), "--name", "alicelaptop")
	shareDir := t.TempDir()
	os.WriteFile(filepath.Join(shareDir, "f.txt"), []byte("hello"), 0o644)
	must(t, a.home, "share", "add", "taxreturns2026", shareDir, "--peer", "bobdesktop")

	capture := r.Capture("lan0")
	start := time.Now()
	a.start(t)
	b.start(t)
	sameIP := func(want netip.Addr) func(netip.Addr) bool {
		return func(got netip.Addr) bool { return got == want.WithZone("") }
	}
	got := a.waitLinked(t, "bobdesktop", 10*time.Second, sameIP(addrB))
	b.waitLinked(t, "alicelaptop", 10*time.Second, sameIP(addrA))
	t.Logf("linked %v after both daemons started; alice sees bob at %v", time.Since(start).Round(time.Millisecond), got)
	if v6 && !got.Addr().IsLinkLocalUnicast() {
		t.Errorf("on an IPv6-link-local-only network bob is at %v", got)
	}
	// Some traffic over the link: the share's name crosses it (encrypted).
	if out := must(t, b.home, "ls", "alicelaptop:"); !strings.Contains(out, "taxreturns2026") {
		t.Fatalf("bob lists alice's shares: %q", out)
	}

	if !v6 {
		strangerGetsNoCertificate(t, hc, addrA)
	}

	// Move bob: a new address on the same network.
	var newB netip.Addr
	if v6 {
		newB = netip.MustParseAddr("fe80::beef:1")
		hb.Run("ip", "-6", "addr", "del", addrB.String()+"/64", "dev", hb.Iface)
		hb.Run("ip", "-6", "addr", "add", newB.String()+"/64", "dev", hb.Iface)
	} else {
		newB = addrB.Next().Next().Next().Next().Next().Next().Next().Next().Next().Next() // .13 and up: free
		// Deleted first: deleting a primary address takes the secondaries of its subnet along.
		hb.Run("ip", "addr", "del", netip.PrefixFrom(addrB, 24).String(), "dev", hb.Iface)
		hb.Run("ip", "addr", "add", netip.PrefixFrom(newB, 24).String(), "dev", hb.Iface)
	}
	moved := time.Now()
	heard := "addr=" + netip.AddrPortFrom(newB, 7462).String()
	if v6 {
		heard = "addr=[" + newB.String() + "%" + ha.Iface + "]:7462"
	}
	for !strings.Contains(a.logText(), heard) {
		if time.Since(moved) > 10*time.Second {
			t.Fatalf("alice did not hear bob at %s within 10 s of the move; log:\n%s", heard, tail(a.logText(), 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("alice heard bob at his new address %v after the move", time.Since(moved).Round(time.Millisecond))
	// Heard there, the old link is probed and closed: without that, keepalive would take
	// 30 s to give it up.
	a.waitLinked(t, "bobdesktop", 20*time.Second, sameIP(newB))
	t.Logf("linked again at the new address %v after the move", time.Since(moved).Round(time.Millisecond))

	// Run over two epochs at least, so that the tags must have changed on the wire.
	if d := 2*labEpoch + time.Second - time.Since(start); d > 0 {
		time.Sleep(d)
	}
	ranFor := time.Since(start)
	a.stop()
	b.stop()
	pkts, err := capture.Packets()
	if err != nil {
		t.Fatal(err)
	}
	if len(pkts) == 0 {
		t.Fatal("the capture is empty")
	}
	checkNothingIdentifying(t, pkts, a, b)

	// The tags alice announced for bob over the run: one per epoch, each on the wire.
	key := discover.PeerKey(a.id, b.id, nil)
	first := discover.EpochAt(start, labEpoch)
	last := discover.EpochAt(start.Add(ranFor), labEpoch)
	var onWire []string
	for e := first; e <= last; e++ {
		tag := discover.Tag(key, e)
		if containsAny(pkts, []byte(tag)) {
			onWire = append(onWire, tag)
		}
	}
	if len(onWire) < 2 {
		t.Errorf("over %d epochs of %v, alice's tags for bob seen on the wire: %v; want them to change", last-first+1, labEpoch, onWire)
	}
}

// checkNothingIdentifying fails if any packet holds a device ID (text or bytes), a device,
// share, host or user name.
func checkNothingIdentifying(t *testing.T, pkts [][]byte, devs ...*labDevice) {
	t.Helper()
	secrets := map[string][]byte{"share name": []byte("taxreturns2026")}
	for _, d := range devs {
		secrets["device ID of "+d.name] = []byte(d.id.String())
		secrets["device ID of "+d.name+" without dashes"] = []byte(strings.ReplaceAll(d.id.String(), "-", ""))
		secrets["device ID bytes of "+d.name] = d.id[:]
		secrets["device name "+d.name] = []byte(d.name)
	}
	if h, err := os.Hostname(); err == nil && len(h) >= 4 {
		secrets["host name"] = []byte(h)
	}
	if u, err := user.Current(); err == nil && len(u.Username) >= 4 {
		secrets["user name"] = []byte(u.Username)
	}
	for what, s := range secrets {
		for _, variant := range [][]byte{s, bytes.ToLower(s)} {
			if containsAny(pkts, variant) {
				t.Errorf("the capture on the bridge holds the %s (%q)", what, variant)
			}
		}
	}
}

func containsAny(pkts [][]byte, b []byte) bool {
	for _, p := range pkts {
		if bytes.Contains(p, b) {
			return true
		}
	}
	return false
}

// strangerGetsNoCertificate connects from a third host with a TLS client that knows no
// device ID, and checks the handshake ends before any certificate.
func strangerGetsNoCertificate(t *testing.T, h *netlab.Host, target netip.Addr) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Log("openssl not found: the stranger's TLS check is skipped")
		return
	}
	cmd := h.Command("openssl", "s_client", "-connect", netip.AddrPortFrom(target, 7462).String(),
		"-servername", "stranger.example", "-showcerts")
	cmd.Stdin = strings.NewReader("")
	out, _ := cmd.CombinedOutput()
	s := string(out)
	if !strings.Contains(s, "CONNECTED") {
		t.Fatalf("the stranger could not even connect over TCP:\n%s", s)
	}
	if strings.Contains(s, "BEGIN CERTIFICATE") || !strings.Contains(s, "no peer certificate available") {
		t.Errorf("a stranger's TLS handshake got a certificate, or did not end before one:\n%s", s)
	}
}
