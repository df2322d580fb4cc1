//go:build linux

package node_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/netlab"
	"github.com/peerfs/peerfs/internal/peertest"
)

// Lab tests: real peerfs daemons (the built binary) in network namespaces behind NAT
// routers, a real relay ("peerfs relay serve") on the lab's internet. The CLI talks to each
// daemon over its control socket, which is a file: it runs outside the namespaces.

var (
	peerfsOnce sync.Once
	peerfsBin  string
	peerfsErr  error
)

// peerfsBinary builds cmd/peerfs once per test binary.
func peerfsBinary(t *testing.T) string {
	t.Helper()
	peerfsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "peerfs-lab-bin-")
		if err != nil {
			peerfsErr = err
			return
		}
		afterTests = append(afterTests, func() { os.RemoveAll(dir) })
		peerfsBin = filepath.Join(dir, "peerfs")
		out, err := exec.Command("go", "build", "-o", peerfsBin, "github.com/peerfs/peerfs/cmd/peerfs").CombinedOutput()
		if err != nil {
			peerfsErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if peerfsErr != nil {
		t.Fatal(peerfsErr)
	}
	return peerfsBin
}

// labDevice is one device: a home, and a daemon in host's namespace.
type labDevice struct {
	t      *testing.T
	name   string
	bin    string
	home   string
	host   *netlab.Host
	id     string
	daemon *exec.Cmd
	log    *netlab.Output
}

func newLabDevice(t *testing.T, name string, host *netlab.Host) *labDevice {
	d := &labDevice{t: t, name: name, bin: peerfsBinary(t), home: filepath.Join(t.TempDir(), name), host: host}
	d.cli("init", "--name", name)
	d.id = strings.TrimSpace(d.cli("id"))
	return d
}

// cli runs a peerfs command for d's home and returns its stdout; a failure ends the test.
func (d *labDevice) cli(args ...string) string {
	d.t.Helper()
	out, err := d.tryCLI(args...)
	if err != nil {
		d.t.Fatalf("%s: peerfs %s: %v", d.name, strings.Join(args, " "), err)
	}
	return out
}

func (d *labDevice) tryCLI(args ...string) (string, error) {
	cmd := exec.Command(d.bin, append([]string{"--home", d.home}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%v: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(out), nil
}

// start runs d's daemon in its namespace and returns when its control socket answers.
func (d *labDevice) start() {
	d.t.Helper()
	d.log = &netlab.Output{}
	d.daemon = d.host.Command(d.bin, "--home", d.home, "daemon", "-v")
	d.daemon.Stderr = d.log
	if err := d.daemon.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(d.stop)
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := d.tryCLI("status"); err == nil {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: the daemon never answered: %s", d.name, d.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *labDevice) stop() {
	if d.daemon != nil && d.daemon.Process != nil {
		netlab.Interrupt(d.daemon, 15*time.Second)
		d.daemon = nil
		if d.t.Failed() {
			d.t.Logf("%s's daemon log:\n%s", d.name, d.log)
		}
	}
}

// inMount is path as the daemon sees it: "ip netns exec" runs it in a mount namespace of its
// own, so its FUSE mounts are reached through /proc/PID/root.
func (d *labDevice) inMount(path string) string {
	return filepath.Join("/proc", strconv.Itoa(d.daemon.Process.Pid), "root", path)
}

func (d *labDevice) status() api.StatusResult {
	d.t.Helper()
	var st api.StatusResult
	if err := json.Unmarshal([]byte(d.cli("status", "--json")), &st); err != nil {
		d.t.Fatal(err)
	}
	return st
}

// waitPath waits until d sees peer connected on path and returns the peer's status.
func (d *labDevice) waitPath(peer, path string, within time.Duration) api.PeerStatus {
	d.t.Helper()
	var last api.StatusResult
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		last = d.status()
		for _, p := range last.Peers {
			if p.Name == peer && p.Connected && (path == "" || p.Path == path) {
				return p
			}
		}
	}
	d.t.Fatalf("%s never saw %s on path %q within %v: %+v", d.name, peer, path, within, last)
	return api.PeerStatus{}
}

// trust makes a and b trust each other (no address: they meet at the relays) and use u.
func trustViaRelay(a, b *labDevice, relayURL string) {
	a.cli("peer", "add", b.id, "--name", b.name)
	b.cli("peer", "add", a.id, "--name", a.name)
	a.cli("relay", "add", relayURL)
	b.cli("relay", "add", relayURL)
}

// labRelay is "peerfs relay serve" on a public host, port 443, with metrics on its loopback.
type labRelay struct {
	t    *testing.T
	host *netlab.Host
	home string
	cmd  *exec.Cmd
	url  string
}

func startLabRelay(t *testing.T, host *netlab.Host, home string) *labRelay {
	t.Helper()
	r := &labRelay{t: t, host: host, home: home}
	r.cmd = host.Command(peerfsBinary(t), "--home", home, "relay", "serve", "--listen", ":443",
		"--advertise", host.Addr.String(), "--metrics", "127.0.0.1:9450", "--json")
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.Stderr = io.Discard
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("relay serve printed no URL: %v", err)
	}
	go io.Copy(io.Discard, stdout)
	var first struct{ URL string }
	if err := json.Unmarshal([]byte(line), &first); err != nil || first.URL == "" {
		t.Fatalf("relay serve's first line %q: %v", line, err)
	}
	r.url = first.URL
	return r
}

func (r *labRelay) stop() {
	if r.cmd != nil {
		r.cmd.Process.Signal(os.Interrupt)
		r.cmd.Wait()
		r.cmd = nil
	}
}

var metricRe = regexp.MustCompile(`(?m)^(peerfs_relay_bytes_total|peerfs_relay_sessions) ([0-9.e+]+)$`)

// metrics reads the relay's byte counter and its sessions now.
func (r *labRelay) metrics() (bytes, sessions float64) {
	r.t.Helper()
	out := r.host.Run("curl", "-sf", "http://127.0.0.1:9450/metrics")
	for _, m := range metricRe.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		if m[1] == "peerfs_relay_bytes_total" {
			bytes = v
		} else {
			sessions = v
		}
	}
	return bytes, sessions
}

func (r *labRelay) waitIdle() {
	r.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, s := r.metrics(); s == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatal("the relay still holds sessions")
		}
	}
}

// sharedFile makes a share "docs" on owner for peer with one file of size bytes holding
// marker, and returns its path.
func sharedFile(t *testing.T, owner, peer *labDevice, size int, marker string) string {
	dir := t.TempDir()
	path := filepath.Join(dir, "data.bin")
	peertest.WriteRandomFile(t, path, int64(size), 5)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < int64(size); off += 1 << 20 {
		f.WriteAt([]byte(marker), off)
	}
	f.Close()
	owner.cli("share", "add", "docs", dir, "--peer", peer.name)
	return path
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// pullAndCheck pulls docs/data.bin from owner to d and compares it with src.
func pullAndCheck(t *testing.T, d, owner *labDevice, src string) {
	t.Helper()
	dest := filepath.Join(t.TempDir(), "data.bin")
	d.cli("pull", owner.name+":docs/data.bin", dest)
	if fileSum(t, dest) != fileSum(t, src) {
		t.Fatal("the pulled file differs")
	}
}

// TestLabHomeNATsPunched: two devices behind two home routers, with no address for each other,
// meet at the relay, punch a direct path (path "punched"), and the relay carries no file data
// after the switch; a marker in the file never crosses the relay's interface. A network change
// makes the daemon try again at once. Killing the relay while direct goes unnoticed.
func TestLabHomeNATsPunched(t *testing.T) {
	if testing.Short() {
		t.Skip("lab test: runs daemons in network namespaces for a minute")
	}
	lab := netlab.New(t)
	relayHost := lab.Public("relay")
	h1 := lab.Router("home1", netlab.RouterOptions{NAT: netlab.HomeNAT}).AddHost("laptop")
	h2 := lab.Router("home2", netlab.RouterOptions{NAT: netlab.HomeNAT}).AddHost("desktop")
	r := startLabRelay(t, relayHost, t.TempDir())
	a, b := newLabDevice(t, "laptop", h1), newLabDevice(t, "desktop", h2)
	trustViaRelay(a, b, r.url)
	const marker = "MARKER-7f3a1c-peerfs-lab"
	src := sharedFile(t, a, b, 8<<20, marker)

	start := time.Now()
	a.start()
	b.start()
	first := b.waitPath("laptop", "", 30*time.Second)
	linked := time.Since(start)
	p := b.waitPath("laptop", api.PathPunched, 60*time.Second)
	punched := time.Since(start)
	t.Logf("figures: first link %v (path %s), punched %v, remote %s", linked.Round(time.Millisecond), first.Path,
		punched.Round(time.Millisecond), p.RemoteAddr)
	if !strings.HasPrefix(p.RemoteAddr, h1.Public.String()+":") {
		t.Errorf("punched link to %s, want the laptop's router %s", p.RemoteAddr, h1.Public)
	}
	a.waitPath("desktop", api.PathPunched, 10*time.Second)

	r.waitIdle()
	capture := relayHost.Capture(relayHost.Iface)
	before, _ := r.metrics()
	pullAndCheck(t, b, a, src)
	after, _ := r.metrics()
	if after != before {
		t.Errorf("the relay carried %v bytes after the switch", after-before)
	}
	capture.Stop()
	if seen, err := capture.Contains([]byte(marker)); err != nil || seen {
		t.Errorf("marker seen on the relay's interface: %v, %v", seen, err)
	}

	// A network change: a new address on the laptop's interface.
	h1.Run("ip", "addr", "add", "10.1.0.200/24", "dev", h1.Iface)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(a.log.String(), "reconnecting after a network change"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not notice the new address")
		}
	}

	// The relay goes away: the direct link does not notice.
	since := b.waitPath("laptop", api.PathPunched, time.Second).Since
	r.stop()
	pullAndCheck(t, b, a, src)
	if q := b.waitPath("laptop", api.PathPunched, time.Second); !q.Since.Equal(since) {
		t.Errorf("the link changed when the relay went away: since %v, was %v", q.Since, since)
	}
}

// TestLabSymmetricNATStaysRelayed: behind a router that gives each connection a new port the
// punch cannot succeed; the link stays relayed and pull and mount work through it.
func TestLabSymmetricNATStaysRelayed(t *testing.T) {
	if testing.Short() {
		t.Skip("lab test: runs daemons in network namespaces for a minute")
	}
	lab := netlab.New(t)
	relayHost := lab.Public("relay")
	h1 := lab.Router("home1", netlab.RouterOptions{NAT: netlab.HomeNAT}).AddHost("laptop")
	h2 := lab.Router("cgnat", netlab.RouterOptions{NAT: netlab.SymmetricNAT}).AddHost("phone")
	r := startLabRelay(t, relayHost, t.TempDir())
	a, b := newLabDevice(t, "laptop", h1), newLabDevice(t, "phone", h2)
	trustViaRelay(a, b, r.url)
	const marker = "MARKER-c0ffee-relayed"
	src := sharedFile(t, a, b, 4<<20, marker)

	start := time.Now()
	a.start()
	b.start()
	p := b.waitPath("laptop", api.PathRelayed, 30*time.Second)
	t.Logf("figures: relayed link %v, via %s", time.Since(start).Round(time.Millisecond), p.Via)
	// Several PUNCH rounds fail meanwhile.
	time.Sleep(15 * time.Second)
	if q := b.waitPath("laptop", "", time.Second); q.Path != api.PathRelayed {
		t.Fatalf("path %s behind a symmetric NAT", q.Path)
	}
	before, _ := r.metrics()
	pullAndCheck(t, b, a, src)
	if after, _ := r.metrics(); after-before < 4<<20 {
		t.Errorf("the relay carried %v bytes of a 4 MiB pull", after-before)
	}
	// A file crosses the relay encrypted end to end: its marker never shows there. (A small
	// one: tcpdump drops packets of a fast transfer.)
	small := bytes.Repeat([]byte(marker+"\n"), 2000)
	os.WriteFile(filepath.Join(filepath.Dir(src), "marker.txt"), small, 0o644)
	capture := relayHost.Capture(relayHost.Iface)
	dest := filepath.Join(t.TempDir(), "marker.txt")
	b.cli("pull", "laptop:docs/marker.txt", dest)
	capture.Stop()
	if got, _ := os.ReadFile(dest); !bytes.Equal(got, small) {
		t.Error("the pulled marker file differs")
	}
	if seen, err := capture.Contains([]byte(marker)); err != nil || seen {
		t.Errorf("marker seen on the relay's interface: %v, %v", seen, err)
	}

	peertest.NeedFUSE(t)
	mnt := t.TempDir()
	b.cli("mount", "laptop:docs", mnt)
	t.Cleanup(func() { b.tryCLI("unmount", mnt) })
	if fileSum(t, b.inMount(filepath.Join(mnt, "data.bin"))) != fileSum(t, src) {
		t.Fatal("the file read through the relayed mount differs")
	}
}

// TestLabOnlyHTTPS: a device whose network lets out only TCP to port 443 reaches its peer
// through the relay.
func TestLabOnlyHTTPS(t *testing.T) {
	if testing.Short() {
		t.Skip("lab test: runs daemons in network namespaces")
	}
	lab := netlab.New(t)
	relayHost := lab.Public("relay")
	h1 := lab.Router("office", netlab.RouterOptions{NAT: netlab.HomeNAT, OnlyHTTPS: true}).AddHost("laptop")
	h2 := lab.Router("home", netlab.RouterOptions{NAT: netlab.HomeNAT}).AddHost("desktop")
	r := startLabRelay(t, relayHost, t.TempDir())
	a, b := newLabDevice(t, "laptop", h1), newLabDevice(t, "desktop", h2)
	trustViaRelay(a, b, r.url)
	src := sharedFile(t, b, a, 2<<20, "marker")

	start := time.Now()
	a.start()
	b.start()
	p := a.waitPath("desktop", api.PathRelayed, 30*time.Second)
	t.Logf("figures: relayed link through an HTTPS-only network %v", time.Since(start).Round(time.Millisecond))
	if p.Via == "" {
		t.Errorf("relayed link without via: %+v", p)
	}
	pullAndCheck(t, a, b, src)
}

// TestLabDirectPathCutMidMount: with a mount open on a punched link, the direct path dies:
// the link falls back to the relay and the mount serves again.
func TestLabDirectPathCutMidMount(t *testing.T) {
	if testing.Short() {
		t.Skip("lab test: runs daemons in network namespaces for a minute")
	}
	peertest.NeedFUSE(t)
	lab := netlab.New(t)
	relayHost := lab.Public("relay")
	r1 := lab.Router("home1", netlab.RouterOptions{NAT: netlab.HomeNAT})
	r2 := lab.Router("home2", netlab.RouterOptions{NAT: netlab.HomeNAT})
	h1, h2 := r1.AddHost("laptop"), r2.AddHost("desktop")
	r := startLabRelay(t, relayHost, t.TempDir())
	a, b := newLabDevice(t, "laptop", h1), newLabDevice(t, "desktop", h2)
	trustViaRelay(a, b, r.url)
	src := sharedFile(t, a, b, 4<<20, "marker")
	// A file the mount has not read yet: reading it after the cut needs the owner.
	second := filepath.Join(filepath.Dir(src), "second.bin")
	peertest.WriteRandomFile(t, second, 1<<20, 6)
	third := filepath.Join(filepath.Dir(src), "third.bin")
	peertest.WriteRandomFile(t, third, 1<<20, 7)
	a.start()
	b.start()
	b.waitPath("laptop", api.PathPunched, 60*time.Second)

	mnt := t.TempDir()
	b.cli("mount", "laptop:docs", mnt)
	t.Cleanup(func() { b.tryCLI("unmount", mnt) })
	if fileSum(t, b.inMount(filepath.Join(mnt, "data.bin"))) != fileSum(t, src) {
		t.Fatal("read through the mount differs")
	}

	restore := lab.Cut(r1.Addr, r2.Addr)
	defer restore()
	cut := time.Now()
	// Read at once: the request waits on the dead path until the link is given up, then
	// goes through the relay.
	var got []byte
	var err error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		got, err = exec.CommandContext(ctx, "cat", b.inMount(filepath.Join(mnt, "second.bin"))).Output()
		cancel()
		if err == nil {
			break
		}
	}
	if want, _ := os.ReadFile(second); !bytes.Equal(got, want) {
		t.Fatalf("the mount does not serve after the fallback: %q, %v", got, err)
	}
	serving := time.Since(cut)
	p := b.waitPath("laptop", "", time.Second)
	if p.Path != api.PathRelayed {
		t.Errorf("path %s after the direct path was cut", p.Path)
	}
	t.Logf("figures: the mount served again %v after the cut, through the relay (%s)", serving.Round(time.Millisecond), p.Via)

	// Then the relay goes out of reach of both for 30 s (the links die, every backoff grows); once
	// it is back, the mount reads again within 10 s.
	cutA, cutB := lab.Cut(r1.Addr, relayHost.Addr), lab.Cut(r2.Addr, relayHost.Addr)
	time.Sleep(30 * time.Second)
	if p := b.status().Peers[0]; p.Connected {
		t.Logf("the link survived the outage")
	}
	cutA()
	cutB()
	back := time.Now()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		got, err = exec.CommandContext(ctx, "cat", b.inMount(filepath.Join(mnt, "third.bin"))).Output()
		cancel()
		if err == nil {
			break
		}
	}
	again := time.Since(back)
	if want, _ := os.ReadFile(third); !bytes.Equal(got, want) {
		t.Fatalf("the mount does not serve after the network came back: %v", err)
	}
	t.Logf("figures: the mount served again %v after the network came back", again.Round(time.Millisecond))
	if again > 10*time.Second {
		t.Errorf("the mount served again %v after the network came back, want within 10 s", again)
	}
}

// TestLabDirectAddress: a device behind a home router dials a server with a public address it
// was given: path "direct", the relay unused.
func TestLabDirectAddress(t *testing.T) {
	if testing.Short() {
		t.Skip("lab test: runs daemons in network namespaces")
	}
	lab := netlab.New(t)
	relayHost := lab.Public("relay")
	server := lab.Public("server")
	h1 := lab.Router("home", netlab.RouterOptions{NAT: netlab.HomeNAT}).AddHost("laptop")
	r := startLabRelay(t, relayHost, t.TempDir())
	a, b := newLabDevice(t, "laptop", h1), newLabDevice(t, "server", server)
	trustViaRelay(a, b, r.url)
	a.cli("peer", "set", "server", "--addr", server.Addr.String()+":7462")
	src := sharedFile(t, b, a, 2<<20, "marker")

	start := time.Now()
	b.start()
	a.start()
	p := a.waitPath("server", api.PathDirect, 30*time.Second)
	t.Logf("figures: direct link %v after the daemons started, to %s", time.Since(start).Round(time.Millisecond), p.RemoteAddr)
	before, _ := r.metrics()
	pullAndCheck(t, a, b, src)
	if after, _ := r.metrics(); after != before {
		t.Errorf("the relay carried %v bytes of a direct pull", after-before)
	}
}
