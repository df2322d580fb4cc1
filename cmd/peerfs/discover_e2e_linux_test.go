package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startDaemonArgs starts a daemon for home on loopback with extra flags, logging to
// home.log, and stops it at the end of the test.
func startDaemonArgs(t *testing.T, home string, extra ...string) {
	t.Helper()
	args := append([]string{"--home", home, "daemon", "--listen", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(bin, args...)
	logf, err := os.OpenFile(home+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		logf.Close()
	})
}

// connected reports whether home's daemon sees peer connected.
func connected(t *testing.T, home, peer string) bool {
	t.Helper()
	out, _, code := peerfs(t, home, "status", "--json")
	if code != 0 {
		return false
	}
	var st struct {
		Peers []struct {
			Name      string `json:"name"`
			Connected bool   `json:"connected"`
		} `json:"peers"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	for _, p := range st.Peers {
		if p.Name == peer {
			return p.Connected
		}
	}
	return false
}

// TestDaemonDiscoveryOnLoopback: two daemons on loopback that trust each other with no address
// link by discovery (kept to the loopback interface, since they listen on 127.0.0.1); with
// --no-discovery on both they do not, and say why in their log.
func TestDaemonDiscoveryOnLoopback(t *testing.T) {
	for _, off := range []bool{false, true} {
		name := "on"
		if off {
			name = "off"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			a, b := filepath.Join(dir, "alpha"), filepath.Join(dir, "beta")
			must(t, a, "init", "--name", "alpha")
			must(t, b, "init", "--name", "beta")
			must(t, a, "peer", "add", strings.TrimSpace(must(t, b, "id")), "--name", "beta")
			must(t, b, "peer", "add", strings.TrimSpace(must(t, a, "id")), "--name", "alpha")
			var extra []string
			if off {
				extra = []string{"--no-discovery"}
			}
			startDaemonArgs(t, a, extra...)
			startDaemonArgs(t, b, extra...)
			deadline := time.Now().Add(10 * time.Second)
			if off {
				deadline = time.Now().Add(3 * time.Second)
			}
			for !connected(t, a, "beta") && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			linked := connected(t, a, "beta")
			log, _ := os.ReadFile(a + ".log")
			switch {
			case !off && !linked:
				t.Fatalf("the daemons did not find each other on loopback; log:\n%s", log)
			case off && linked:
				t.Fatal("the daemons linked with --no-discovery")
			case off && !strings.Contains(string(log), "LAN discovery is off"):
				t.Errorf("with --no-discovery the log does not say discovery is off:\n%s", log)
			}
		})
	}
}
