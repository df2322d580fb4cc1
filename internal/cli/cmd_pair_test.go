package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/daemon"
)

// startDaemon runs a real daemon for home, listening for peers on a loopback port, until the
// test ends, and returns its peer address.
func startDaemon(t *testing.T, home string) string {
	t.Helper()
	return startDaemonWith(t, home, daemon.Options{})
}

// startDaemonWith is startDaemon with opts (Paths and Listen are set here).
func startDaemonWith(t *testing.T, home string, opts daemon.Options) string {
	t.Helper()
	p, err := config.ResolvePaths(home)
	if err != nil {
		t.Fatal(err)
	}
	opts.Paths, opts.Listen = p, "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon of %s: %v", home, err)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		exit, out, _ := run(t, home, "status", "--json")
		if exit == 0 {
			var st api.StatusResult
			decodeOne(t, out, &st)
			return st.Listen
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon of %s did not start", home)
		}
	}
}

// pairShower is a running "peerfs pair --json" that shows a code.
type pairShower struct {
	code  string
	lines chan string // the lines after the first
	exit  chan int
}

// startPairShow starts "peerfs pair --json" on home and waits for its code.
func startPairShow(t *testing.T, home string, args ...string) *pairShower {
	t.Helper()
	r, w := io.Pipe()
	s := &pairShower{lines: make(chan string, 4), exit: make(chan int, 1)}
	var errOut strings.Builder
	go func() {
		exit := execute(context.Background(), append([]string{"--home", home, "--json", "pair"}, args...), w, &errOut, false)
		w.Close()
		s.exit <- exit
	}()
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		t.Fatalf("peerfs pair printed no code: %s", errOut.String())
	}
	var first struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(sc.Bytes(), &first); err != nil || first.Code == "" {
		t.Fatalf("first line %q: want {\"code\": ...}", sc.Text())
	}
	s.code = first.Code
	go func() {
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	return s
}

func (s *pairShower) wait(t *testing.T) (exit int, last string) {
	t.Helper()
	select {
	case exit = <-s.exit:
	case <-time.After(time.Minute):
		t.Fatal("peerfs pair did not end")
	}
	for l := range s.lines {
		last = l
	}
	return exit, last
}

func initHomes(t *testing.T) (a, b string) {
	a, b = filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	mustRun(t, a, "init", "--name", "alpha")
	mustRun(t, b, "init", "--name", "Beta Laptop")
	return a, b
}

func peerList(t *testing.T, home string) []peerJSON {
	t.Helper()
	var ls struct {
		Peers []peerJSON `json:"peers"`
	}
	decodeOne(t, mustRun(t, home, "peer", "ls", "--json"), &ls)
	return ls.Peers
}

// TestPairDaemons: two daemons pair by a code, then each lists and pulls the other's share
// with no device ID and no address typed.
func TestPairDaemons(t *testing.T) {
	a, b := initHomes(t)
	addrA := startDaemon(t, a)
	startDaemon(t, b)

	s := startPairShow(t, a)
	// No address: the joiner finds the shower by the code on the LAN (here: loopback).
	out := mustRun(t, b, "pair", strings.ToUpper(strings.ReplaceAll(s.code, "-", " ")))
	if !strings.HasPrefix(out, "paired with alpha (") {
		t.Errorf("joiner printed %q", out)
	}
	exit, last := s.wait(t)
	var done pairDoneJSON
	if err := json.Unmarshal([]byte(last), &done); exit != 0 || err != nil || done.Type != "done" || done.Name != "beta-laptop" {
		t.Fatalf("shower: exit %d, last line %q", exit, last)
	}
	pa, pb := peerList(t, a), peerList(t, b)
	if len(pa) != 1 || len(pb) != 1 || pa[0].Name != "beta-laptop" || pb[0].Name != "alpha" || pb[0].Addr != addrA || pa[0].Addr == "" {
		t.Fatalf("peers after pairing: alpha has %+v, beta has %+v", pa, pb)
	}
	if done.DeviceID != pa[0].DeviceID.String() {
		t.Errorf("shower reported %s, config has %s", done.DeviceID, pa[0].DeviceID)
	}

	dirA, dirB := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(dirA, "hello.txt"), []byte("from alpha"), 0o644)
	os.WriteFile(filepath.Join(dirB, "hello.txt"), []byte("from beta"), 0o644)
	mustRun(t, a, "share", "add", "docs", dirA, "--peer", "beta-laptop")
	mustRun(t, b, "share", "add", "docs", dirB, "--peer", "alpha")
	for _, c := range []struct{ home, remote, want string }{{a, "beta-laptop", "from beta"}, {b, "alpha", "from alpha"}} {
		if out := mustRun(t, c.home, "ls", c.remote+":docs"); !strings.Contains(out, "hello.txt") {
			t.Errorf("ls %s:docs = %q", c.remote, out)
		}
		dest := filepath.Join(t.TempDir(), "got.txt")
		mustRun(t, c.home, "pull", c.remote+":docs/hello.txt", dest)
		if got, err := os.ReadFile(dest); err != nil || string(got) != c.want {
			t.Errorf("pulled %q, %v; want %q", got, err, c.want)
		}
	}

	// Pairing the same two again is refused on both sides, and changes nothing.
	s = startPairShow(t, a)
	if exit, _, errOut := run(t, b, "pair", s.code, "--addr", addrA); exit != ExitAlreadyTrusted {
		t.Errorf("pairing again: exit %d (%s), want %d", exit, errOut, ExitAlreadyTrusted)
	}
	if exit, _ := s.wait(t); exit != ExitAlreadyTrusted {
		t.Errorf("shower pairing again: exit %d, want %d", exit, ExitAlreadyTrusted)
	}
}

// TestPairDaemonsThroughRelay: two daemons with LAN discovery off that use the same relay
// ("peerfs relay serve") pair by code through it, remember no address, and list and pull
// each other's share through the relay.
func TestPairDaemonsThroughRelay(t *testing.T) {
	url := startRelayCmd(t)
	a, b := initHomes(t)
	for _, home := range []string{a, b} {
		mustRun(t, home, "relay", "add", url)
		startDaemonWith(t, home, daemon.Options{NoDiscovery: true})
	}
	s := startPairShow(t, a)
	if out := mustRun(t, b, "pair", s.code); !strings.HasPrefix(out, "paired with alpha (") {
		t.Errorf("joiner printed %q", out)
	}
	if exit, last := s.wait(t); exit != 0 || !strings.Contains(last, `"name":"beta-laptop"`) {
		t.Fatalf("shower: exit %d, last line %q", exit, last)
	}
	pa, pb := peerList(t, a), peerList(t, b)
	if len(pa) != 1 || len(pb) != 1 || pa[0].Addr != "" || pb[0].Addr != "" {
		t.Fatalf("peers after pairing through the relay: alpha has %+v, beta has %+v", pa, pb)
	}
	dirA := t.TempDir()
	os.WriteFile(filepath.Join(dirA, "hello.txt"), []byte("from alpha"), 0o644)
	mustRun(t, a, "share", "add", "docs", dirA, "--peer", "beta-laptop")
	if out := mustRun(t, b, "ls", "alpha:docs"); !strings.Contains(out, "hello.txt") {
		t.Errorf("ls alpha:docs = %q", out)
	}
	dest := filepath.Join(t.TempDir(), "got.txt")
	mustRun(t, b, "pull", "alpha:docs/hello.txt", dest)
	if got, err := os.ReadFile(dest); err != nil || string(got) != "from alpha" {
		t.Errorf("pulled %q, %v", got, err)
	}
}

// TestPairWrongCode: a wrong code fails on both devices, trusts nobody and uses the code up.
func TestPairWrongCode(t *testing.T) {
	a, b := initHomes(t)
	addrA := startDaemon(t, a)
	startDaemon(t, b)

	s := startPairShow(t, a)
	words := strings.Split(s.code, "-")
	words[3] = map[bool]string{true: "zoo", false: "abandon"}[words[3] != "zoo"]
	wrong := strings.Join(words, "-")
	exit, _, errOut := run(t, b, "pair", wrong, "--addr", addrA)
	if exit != ExitWrongCode || !strings.Contains(errOut, "wrong code") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("joiner with a wrong code: exit %d, stderr %q; want %d and one line", exit, errOut, ExitWrongCode)
	}
	if exit, _ := s.wait(t); exit != ExitWrongCode {
		t.Errorf("shower: exit %d, want %d", exit, ExitWrongCode)
	}
	if pa, pb := peerList(t, a), peerList(t, b); len(pa)+len(pb) != 0 {
		t.Errorf("trusted after a wrong code: %+v %+v", pa, pb)
	}
	// The right code, now, finds nobody waiting.
	if exit, _, errOut := run(t, b, "pair", s.code, "--addr", addrA); exit != ExitCodeUsed {
		t.Errorf("right code after a wrong one: exit %d (%s), want %d", exit, errOut, ExitCodeUsed)
	}
}

// TestPairExpiredAndBusy: a code nobody completes expires; a second pairing while one waits
// is refused; a code typed after it expired finds nobody.
func TestPairExpiredAndBusy(t *testing.T) {
	a, b := initHomes(t)
	addrA := startDaemon(t, a)
	startDaemon(t, b)

	s := startPairShow(t, a, "--timeout", "2s")
	if exit, _, errOut := run(t, a, "pair"); exit != ExitPairingBusy || !strings.Contains(errOut, s.code) {
		t.Errorf("second pairing: exit %d (%s), want %d naming the code shown", exit, errOut, ExitPairingBusy)
	}
	if exit, _ := s.wait(t); exit != ExitCodeExpired {
		t.Errorf("unanswered code: exit %d, want %d", exit, ExitCodeExpired)
	}
	if exit, _, errOut := run(t, b, "pair", s.code, "--addr", addrA); exit != ExitCodeUsed {
		t.Errorf("expired code: exit %d (%s), want %d", exit, errOut, ExitCodeUsed)
	}
	if exit, _, _ := run(t, b, "pair", "42-apple-brave"); exit != ExitUsage {
		t.Errorf("malformed code: exit %d, want %d", exit, ExitUsage)
	}
	if pa, pb := peerList(t, a), peerList(t, b); len(pa)+len(pb) != 0 {
		t.Errorf("trusted: %+v %+v", pa, pb)
	}
	// Pairing runs in the daemon.
	c, _ := initHomes(t)
	if exit, _, errOut := run(t, c, "pair"); exit != ExitNoDaemon || !strings.Contains(errOut, "peerfs daemon") {
		t.Errorf("no daemon: exit %d (%s), want %d saying to start it", exit, errOut, ExitNoDaemon)
	}
}
