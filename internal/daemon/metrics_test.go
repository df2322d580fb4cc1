//go:build unix

package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/metrics"
)

// TestRunMetrics: with --metrics the daemon serves Prometheus metrics on its own listener,
// logs where, and stops serving them when it stops.
func TestRunMetrics(t *testing.T) {
	p, _ := initHome(t)
	if err := config.Update(p, func(f *config.File) error {
		f.Peers = append(f.Peers, config.Peer{Name: "beta", ID: identity.DeviceID{42}, Addr: "127.0.0.1:1"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Paths: p, Listen: "127.0.0.1:0", Metrics: "127.0.0.1:0", Logger: log})
	}()
	status(t, p)
	m := regexp.MustCompile(`msg="serving metrics" url=(http://\S+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no metrics URL in the log:\n%s", logs.String())
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`peerfs_peer_connected{peer="beta"} 0`, "# TYPE peerfs_transfers_total counter", "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v on a clean stop", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not stop")
	}
	c := http.Client{Timeout: 5 * time.Second}
	if resp, err := c.Get(m[1]); err == nil {
		resp.Body.Close()
		t.Error("metrics still served after the daemon stopped")
	}
}

// TestRunMetricsRefusesPublicAddress: an address other machines can reach, from the flag
// or the config file, stops the daemon at start unless the user opted in.
func TestRunMetricsRefusesPublicAddress(t *testing.T) {
	p, _ := initHome(t)
	err := Run(context.Background(), Options{Paths: p, Listen: "127.0.0.1:0", Metrics: "0.0.0.0:0"})
	if !errors.Is(err, metrics.ErrNotLoopback) || !strings.Contains(err.Error(), "--metrics-public") {
		t.Errorf("--metrics 0.0.0.0:0: got %v, want a refusal naming --metrics-public", err)
	}
	if err := config.Update(p, func(f *config.File) error { f.Metrics = ":0"; return nil }); err != nil {
		t.Fatal(err)
	}
	err = Run(context.Background(), Options{Paths: p, Listen: "127.0.0.1:0"})
	if !errors.Is(err, metrics.ErrNotLoopback) {
		t.Errorf(`config "metrics": ":0": got %v, want a refusal`, err)
	}
}
