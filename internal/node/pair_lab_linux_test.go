//go:build linux

package node_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/netlab"
)

// TestLabPairThroughRelay: two devices behind two home routers, on no common LAN, that use
// the same relay pair by code ("peerfs pair" on one, "peerfs pair CODE" on the other, nothing
// else configured), then link (relayed, then punched) and list and pull each other's share.
func TestLabPairThroughRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("lab test: runs daemons in network namespaces")
	}
	lab := netlab.New(t)
	relayHost := lab.Public("relay")
	h1 := lab.Router("home1", netlab.RouterOptions{NAT: netlab.HomeNAT}).AddHost("laptop")
	h2 := lab.Router("home2", netlab.RouterOptions{NAT: netlab.HomeNAT}).AddHost("desktop")
	r := startLabRelay(t, relayHost, t.TempDir())
	a, b := newLabDevice(t, "laptop", h1), newLabDevice(t, "desktop", h2)
	a.cli("relay", "add", r.url)
	b.cli("relay", "add", r.url)
	a.start()
	b.start()

	capture := relayHost.Capture(relayHost.Iface)
	code, shown := labPairShow(t, a)
	start := time.Now()
	out := b.cli("pair", code)
	t.Logf("figures: peerfs pair CODE returned in %v through the relay", time.Since(start).Round(time.Millisecond))
	if !strings.HasPrefix(out, "paired with laptop (") {
		t.Errorf("joiner printed %q", out)
	}
	if last, err := shown(); err != nil || !strings.Contains(last, `"name":"desktop"`) {
		t.Fatalf("shower: %v, last line %q", err, last)
	}
	// What the relay handled holds neither the code nor a device ID or name: the join
	// names the code's relay IDs, and the rest is the devices' TLS.
	capture.Stop()
	secrets := map[string]string{"the code": code, "the code's words": strings.SplitN(code, "-", 2)[1],
		"laptop's device ID": a.id, "desktop's device ID": b.id, "laptop's name": "laptop", "desktop's name": "desktop"}
	for _, d := range []*labDevice{a, b} {
		id, err := identity.ParseDeviceID(d.id)
		if err != nil {
			t.Fatal(err)
		}
		secrets[d.name+"'s raw device ID"] = string(id[:])
	}
	for what, v := range secrets {
		if seen, err := capture.Contains([]byte(v)); err != nil || seen {
			t.Errorf("%s (%q) seen at the relay: %v, %v", what, v, seen, err)
		}
	}
	for _, c := range []struct {
		d    *labDevice
		peer string
	}{{a, "desktop"}, {b, "laptop"}} {
		var list struct {
			Peers []struct{ Name, Addr string }
		}
		if err := json.Unmarshal([]byte(c.d.cli("--json", "peer", "ls")), &list); err != nil {
			t.Fatal(err)
		}
		if peers := list.Peers; len(peers) != 1 || peers[0].Name != c.peer || peers[0].Addr != "" {
			t.Errorf("%s trusts %+v; want %s alone, with no address", c.d.name, peers, c.peer)
		}
	}

	// Each shares a folder with the other, then lists and pulls the other's.
	for _, c := range []struct {
		owner *labDevice
		peer  string
	}{{a, "desktop"}, {b, "laptop"}} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("from "+c.owner.name), 0o644)
		c.owner.cli("share", "add", "docs", dir, "--peer", c.peer)
	}
	p := b.waitPath("laptop", "", 30*time.Second)
	t.Logf("desktop sees laptop on path %s via %q", p.Path, p.Via)
	for _, c := range []struct {
		d      *labDevice
		remote string
	}{{a, "desktop"}, {b, "laptop"}} {
		if out := c.d.cli("ls", c.remote+":docs"); !strings.Contains(out, "hello.txt") {
			t.Errorf("%s: ls %s:docs = %q", c.d.name, c.remote, out)
		}
		dest := filepath.Join(t.TempDir(), "got.txt")
		if _, err := c.d.tryCLI("pull", c.remote+":docs/hello.txt", dest); err != nil {
			// A link replaced while the call ran (relayed by punched) says to run it again.
			t.Logf("%s: pull: %v; running it again", c.d.name, err)
			c.d.cli("pull", c.remote+":docs/hello.txt", dest)
		}
		if got, err := os.ReadFile(dest); err != nil || string(got) != "from "+c.remote {
			t.Errorf("%s pulled %q, %v", c.d.name, got, err)
		}
	}
	// And they punch a direct path as any two peers that met at the relay.
	b.waitPath("laptop", api.PathPunched, 60*time.Second)
}

// labPairShow runs "peerfs pair" for d in its namespace and returns the code it shows, and a
// function that waits for it to end and returns its last line.
func labPairShow(t *testing.T, d *labDevice) (string, func() (string, error)) {
	t.Helper()
	show := d.host.Command(d.bin, "--home", d.home, "--json", "pair")
	stdout, err := show.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	showErr := &netlab.Output{}
	show.Stderr = showErr
	if err := show.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if show.ProcessState == nil {
			show.Process.Kill()
			show.Wait()
		}
	})
	lines := bufio.NewScanner(stdout)
	var first struct{ Code string }
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &first) != nil || first.Code == "" {
		t.Fatalf("peerfs pair's first line %q: %s", lines.Text(), showErr)
	}
	return first.Code, func() (string, error) {
		var last string
		for lines.Scan() {
			last = lines.Text()
		}
		if err := show.Wait(); err != nil {
			return last, fmt.Errorf("%v: %s", err, showErr)
		}
		return last, nil
	}
}

// TestLabPairSameLANWithRelay: two devices on one LAN that also share a relay pair over the
// LAN, which answers before the relays are asked: each remembers the other's LAN address.
func TestLabPairSameLANWithRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("lab test: runs daemons in network namespaces")
	}
	lab := netlab.New(t)
	relayHost := lab.Public("relay")
	home := lab.Router("home", netlab.RouterOptions{NAT: netlab.HomeNAT})
	h1, h2 := home.AddHost("laptop"), home.AddHost("desktop")
	r := startLabRelay(t, relayHost, t.TempDir())
	a, b := newLabDevice(t, "laptop", h1), newLabDevice(t, "desktop", h2)
	a.cli("relay", "add", r.url)
	b.cli("relay", "add", r.url)
	a.start()
	b.start()
	code, shown := labPairShow(t, a)
	var res struct{ Name, Addr string }
	if err := json.Unmarshal([]byte(b.cli("--json", "pair", code)), &res); err != nil {
		t.Fatal(err)
	}
	if last, err := shown(); err != nil || !strings.Contains(last, `"name":"desktop"`) {
		t.Fatalf("shower: %v, last line %q", err, last)
	}
	if res.Name != "laptop" || !strings.HasPrefix(res.Addr, h1.Addr.String()+":") {
		t.Errorf("paired with %+v; want laptop at its LAN address %s", res, h1.Addr)
	}
	if _, sessions := r.metrics(); sessions != 0 {
		t.Errorf("the relay holds %v sessions after a pairing on the LAN", sessions)
	}
}
