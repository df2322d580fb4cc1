package relay

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/transport"
)

// TestRendezvousIDs: both devices compute the same ID for one direction; it differs by
// direction, by pair and by epoch; a listener's IDs cover a dialler whose clock is an hour
// off either way, and not two.
func TestRendezvousIDs(t *testing.T) {
	a, b, c := newIdentity(t).ID, newIdentity(t).ID, newIdentity(t).ID
	now := time.Now()
	e := EpochOf(now)
	if DialID(b, a, now) != RendezvousID(b, a, e) {
		t.Error("DialID is not the current epoch's ID")
	}
	distinct := []ID{RendezvousID(b, a, e), RendezvousID(a, b, e), RendezvousID(c, a, e), RendezvousID(b, a, e+1)}
	for i := range distinct {
		for j := i + 1; j < len(distinct); j++ {
			if distinct[i] == distinct[j] {
				t.Errorf("IDs %d and %d are equal", i, j)
			}
		}
	}
	listen := ListenIDs(a, []identity.DeviceID{b, c}, now)
	if len(listen) != 6 {
		t.Fatalf("%d listening IDs for 2 peers, want 6", len(listen))
	}
	for d, want := range map[time.Duration]bool{-2 * time.Hour: false, -time.Hour: true, 0: true, time.Hour: true, 2 * time.Hour: false} {
		if got := slices.Contains(listen, DialID(b, a, now.Add(d))); got != want {
			t.Errorf("dialler's clock off by %v: met = %v, want %v", d, got, want)
		}
	}
	// Never the hello tag the inner handshake sends in clear (another MAC under the same key).
	tag := RendezvousID(b, a, e)
	if helloTagFor(t, b, a, e) == hex.EncodeToString(tag[:]) {
		t.Error("a rendezvous ID equals the hello tag")
	}
}

// helloTagFor is the hello tag as PROTOCOL.md section 2 defines it.
func helloTagFor(t *testing.T, dialler, listener identity.DeviceID, epoch int64) string {
	t.Helper()
	mac := hmac.New(sha256.New, transport.PairKey(dialler, listener))
	var e [8]byte
	binary.BigEndian.PutUint64(e[:], uint64(epoch))
	mac.Write(e[:])
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

// TestParseURL: what a relay prints parses back; mistakes are refused with a reason.
func TestParseURL(t *testing.T) {
	id := newIdentity(t).ID
	good := URL{Host: "relay.example.org:443", ID: id, Token: "a b&c"}
	back, err := ParseURL(good.String())
	if err != nil || back != good {
		t.Fatalf("round trip of %s: %+v, %v", good, back, err)
	}
	if got, err := ParseURL("peerfs-relay://relay.example.org/?id=" + id.String()); err != nil || got.Host != "relay.example.org:443" {
		t.Errorf("default port: %+v, %v", got, err)
	}
	if got, err := ParseURL("peerfs-relay://[2001:db8::1]:7450/?id=" + strings.ToLower(id.String())); err != nil || got.Host != "[2001:db8::1]:7450" {
		t.Errorf("IPv6 with lower-case ID: %+v, %v", got, err)
	}
	if strings.Contains(good.Redacted(), "token") {
		t.Errorf("Redacted %s keeps the token", good.Redacted())
	}
	for _, bad := range []string{
		"https://relay.example.org/?id=" + id.String(),
		"peerfs-relay:///?id=" + id.String(),
		"peerfs-relay://relay.example.org/",
		"peerfs-relay://relay.example.org/?id=NOTANID",
		"peerfs-relay://relay.example.org/path?id=" + id.String(),
		"peerfs-relay://relay.example.org/?id=" + id.String() + "&token=" + strings.Repeat("x", 256),
	} {
		if _, err := ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) accepted it", bad)
		}
	}
}

// TestMetricsAndLogs: the Prometheus handler shows the session and its bytes; the relay's
// log, at debug level, names neither device nor a rendezvous ID.
func TestMetricsAndLogs(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, u := startRelay(t, Config{Log: log, Token: "t"}, nil)
	d := newDevices(t)
	a, b := pairRaw(t, s, u, d, nil, nil)
	stream(t, b, a, 1<<20, 9)
	v := u
	v.Token = "wrong"
	Dial(context.Background(), v, RoleListen, []ID{DialID(d.b.ID, d.a.ID, time.Now())}, nil)

	rec := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Result().Body)
	for _, want := range []string{
		"peerfs_relay_sessions_total 1",
		"peerfs_relay_sessions 1",
		`peerfs_relay_refusals_total{reason="token"} 1`,
		`peerfs_relay_connections_total{kind="tls"} 3`,
		"process_cpu_seconds_total",
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if st := s.Stats(); st.Bytes < 1<<20 {
		t.Errorf("bytes %d, want at least 1 MiB", st.Bytes)
	}
	a.Close()
	b.Close()
	waitActive(t, s, 0)
	s.Close()
	out := logs.String()
	for _, secret := range []string{d.a.ID.String(), d.b.ID.String(), DialID(d.b.ID, d.a.ID, time.Now()).String()} {
		if strings.Contains(out, secret) {
			t.Errorf("the relay's log names %s:\n%s", secret, out)
		}
	}
}

// TestSourceOf: the per-address cap counts IPv4 addresses one by one and IPv6 by /64.
func TestSourceOf(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"192.0.2.1", "192.0.2.1", true},
		{"192.0.2.1", "192.0.2.2", false},
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9", true},
		{"2001:db8:1:2::1", "2001:db8:1:3::1", false},
	} {
		if got := sourceOf(netip.MustParseAddr(tc.a)) == sourceOf(netip.MustParseAddr(tc.b)); got != tc.same {
			t.Errorf("%s and %s counted together = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
