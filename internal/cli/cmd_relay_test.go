package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/relay"
)

// startRelayCmd runs "peerfs relay serve" with args and returns its first stdout line.
func startRelayCmd(t *testing.T, args ...string) string {
	t.Helper()
	return startRelayCmdIn(t, t.TempDir(), args...)
}

func startRelayCmdIn(t *testing.T, home string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	exited := make(chan int, 1)
	go func() {
		exited <- execute(ctx, append([]string{"--home", home, "relay", "serve", "--listen", "127.0.0.1:0", "-q"}, args...), pw, io.Discard, false)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-exited; code != 0 {
			t.Errorf("relay serve exited with %d after the interrupt, want 0", code)
		}
	})
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Scan()
		first <- sc.Text()
		io.Copy(io.Discard, pr)
	}()
	select {
	case line := <-first:
		return line
	case code := <-exited:
		t.Fatalf("relay serve exited with %d before printing its URL", code)
	case <-time.After(20 * time.Second):
		t.Fatal("relay serve printed no URL")
	}
	return ""
}

// TestRelayServeURL: the first line is a URL devices can use as is: it pins the relay and
// two devices meet through it. The token is left out unless asked for, and with --json
// the line is {"url": ...}.
func TestRelayServeURL(t *testing.T) {
	u, err := relay.ParseURL(startRelayCmd(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := relay.ID{42}
	listening := make(chan error, 1)
	go func() {
		s, err := relay.Dial(ctx, u, relay.RoleListen, []relay.ID{id}, nil)
		if err == nil {
			s.Close()
		}
		listening <- err
	}()
	var s *relay.Session
	for {
		s, err = relay.Dial(ctx, u, relay.RoleDial, []relay.ID{id}, &relay.Options{})
		if !errors.Is(err, relay.ErrNoPartner) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("dialling through the printed URL: %v", err)
	}
	s.Close()
	if err := <-listening; err != nil {
		t.Fatalf("listening through the printed URL: %v", err)
	}

	line := startRelayCmd(t, "--token", "s3cret")
	if u, err := relay.ParseURL(line); err != nil || u.Token != "" {
		t.Errorf("URL %q (%v): the token must stay out of it without --url-token", line, err)
	}
	line = startRelayCmd(t, "--token", "s3cret", "--url-token", "--json")
	var obj struct{ URL string }
	if err := json.Unmarshal([]byte(line), &obj); err != nil {
		t.Fatalf("--json first line %q: %v", line, err)
	}
	if u, err := relay.ParseURL(obj.URL); err != nil || u.Token != "s3cret" {
		t.Errorf("URL %q (%v): want the token with --url-token", obj.URL, err)
	}
}

// TestRelayIdentityIsNotTheDevices: in a device's home the relay makes an identity of its
// own, so its URL does not show the device's ID; and it keeps it across restarts.
func TestRelayIdentityIsNotTheDevices(t *testing.T) {
	home := t.TempDir()
	mustRun(t, home, "init", "--name", "laptop")
	device := strings.TrimSpace(mustRun(t, home, "id"))
	first, err := relay.ParseURL(startRelayCmdIn(t, home))
	if err != nil {
		t.Fatal(err)
	}
	if first.ID.String() == device {
		t.Fatalf("the relay in a device's home uses the device's ID %s", device)
	}
	again, err := relay.ParseURL(startRelayCmdIn(t, home))
	if err != nil || again.ID != first.ID {
		t.Fatalf("after a restart the relay is %v (%v), want %s", again.ID, err, first.ID)
	}
}

// TestRelayAddLsRm: relay add validates the URL and keeps its token in the config file
// only; ls shows the daemon's view of each relay; rm takes the URL or HOST:PORT; each edit
// reloads the daemon.
func TestRelayAddLsRm(t *testing.T) {
	home := t.TempDir()
	mustRun(t, home, "init", "--name", "alpha")
	rid := newDeviceID(t)
	url := "peerfs-relay://relay.example.org/?id=" + rid.String() + "&token=s3cret"
	redacted := "peerfs-relay://relay.example.org:443/?id=" + rid.String()

	// Without a daemon.
	if out := mustRun(t, home, "relay", "add", url); out != "added relay "+redacted+"\n" {
		t.Errorf("relay add printed %q", out)
	}
	fails := []struct {
		name string
		args []string
		exit int
		msg  string
	}{
		{"twice", []string{"relay", "add", "peerfs-relay://relay.example.org:443/?id=" + rid.String()}, ExitUsage, "already added"},
		{"no id", []string{"relay", "add", "peerfs-relay://relay.example.org/"}, ExitUsage, "no id"},
		{"bad scheme", []string{"relay", "add", "https://relay.example.org/?id=" + rid.String()}, ExitUsage, "scheme"},
		{"bad id", []string{"relay", "add", "peerfs-relay://relay.example.org/?id=NOPE"}, ExitUsage, "id"},
		{"no args", []string{"relay", "add"}, ExitUsage, "1 argument"},
		{"rm unknown", []string{"relay", "rm", "192.0.2.1:443"}, ExitNotFound, "no relay at"},
		{"rm garbage", []string{"relay", "rm", "nohost"}, ExitUsage, "HOST:PORT"},
	}
	for _, f := range fails {
		t.Run(f.name, func(t *testing.T) {
			exit, out, errOut := run(t, home, f.args...)
			if exit != f.exit || !strings.Contains(errOut, f.msg) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d mentioning %q", exit, out, errOut, f.exit, f.msg)
			}
		})
	}
	out := mustRun(t, home, "relay", "ls")
	if !strings.Contains(out, redacted) || strings.Contains(out, "s3cret") || !strings.Contains(out, "-") {
		t.Errorf("relay ls without a daemon:\n%s", out)
	}

	// With a daemon: its view, and reloads.
	b := &backend{status: api.StatusResult{Name: "alpha", Relays: []api.RelayStatus{
		{URL: redacted, Connected: true, Transport: "websocket", Observed: "203.0.113.5:40001", Sessions: 3}}}}
	fakeDaemon(t, home, b)
	var ls struct {
		Relays        []relayJSON `json:"relays"`
		DaemonRunning bool        `json:"daemon_running"`
	}
	decodeOne(t, mustRun(t, home, "relay", "ls", "--json"), &ls)
	if !ls.DaemonRunning || len(ls.Relays) != 1 || ls.Relays[0].URL != redacted || !ls.Relays[0].Token ||
		ls.Relays[0].Connected == nil || !*ls.Relays[0].Connected || ls.Relays[0].Observed != "203.0.113.5:40001" ||
		ls.Relays[0].Transport != "websocket" || *ls.Relays[0].Sessions != 3 {
		t.Errorf("relay ls --json: %+v", ls)
	}
	out = mustRun(t, home, "relay", "ls")
	for _, want := range []string{"connected", "websocket", "203.0.113.5:40001"} {
		if !strings.Contains(out, want) {
			t.Errorf("relay ls lacks %q:\n%s", want, out)
		}
	}
	var rm struct {
		Removed        relayJSON `json:"removed"`
		DaemonReloaded bool      `json:"daemon_reloaded"`
	}
	decodeOne(t, mustRun(t, home, "relay", "rm", "relay.example.org:443", "--json"), &rm)
	if rm.Removed.URL != redacted || !rm.DaemonReloaded || b.reloads != 1 {
		t.Errorf("relay rm: %+v, %d reloads", rm, b.reloads)
	}
	mustRun(t, home, "relay", "add", url)
	mustRun(t, home, "relay", "rm", url)
	if b.reloads != 3 {
		t.Errorf("%d reloads after add and rm, want 3", b.reloads)
	}
	p, _ := config.ResolvePaths(home)
	f, err := config.Load(p)
	if err != nil || len(f.Relays) != 0 {
		t.Errorf("config after rm: %v %+v", err, f)
	}
}
