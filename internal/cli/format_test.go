package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/api"
)

func TestModeString(t *testing.T) {
	cases := []struct {
		mode uint32
		typ  string
		want string
	}{
		{0o040755, "dir", "drwxr-xr-x"},
		{0o100644, "file", "-rw-r--r--"},
		{0o120777, "symlink", "lrwxrwxrwx"},
		{0o100000, "file", "----------"},
		{0o104755, "file", "-rwsr-xr-x"},
		{0o104644, "file", "-rwSr--r--"},
		{0o102755, "file", "-rwxr-sr-x"},
		{0o102745, "file", "-rwxr-Sr-x"},
		{0o041777, "dir", "drwxrwxrwt"},
		{0o041776, "dir", "drwxrwxrwT"},
		{0o010644, "other", "prw-r--r--"},
		{0o140755, "other", "srwxr-xr-x"},
		{0o020660, "other", "crw-rw----"},
		{0o060660, "other", "brw-rw----"},
		{0o755, "dir", "drwxr-xr-x"}, // no type bits: Type decides
		{0o777, "symlink", "lrwxrwxrwx"},
		{0o644, "file", "-rw-r--r--"},
		{0o644, "other", "?rw-r--r--"},
	}
	for _, tc := range cases {
		if got := modeString(tc.mode, tc.typ); got != tc.want {
			t.Errorf("modeString(%o, %s) = %q, want %q", tc.mode, tc.typ, got, tc.want)
		}
	}
}

func TestLsTime(t *testing.T) {
	now := time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		t    time.Time
		want string
	}{
		{time.Date(2025, 6, 15, 9, 5, 0, 0, time.UTC), "Jun 15 09:05"},
		{time.Date(2025, 1, 2, 15, 4, 0, 0, time.UTC), "Jan  2 15:04"},
		{time.Date(2024, 12, 1, 0, 0, 0, 0, time.UTC), "Dec  1  2024"}, // older than six months
		{time.Date(2025, 6, 16, 0, 0, 0, 0, time.UTC), "Jun 16  2025"}, // in the future
		{time.Date(1999, 10, 31, 23, 59, 0, 0, time.UTC), "Oct 31  1999"},
		// Shown in now's location.
		{time.Date(2025, 6, 15, 9, 5, 0, 0, time.FixedZone("X", 3600)), "Jun 15 08:05"},
	}
	for _, tc := range cases {
		if got := lsTime(tc.t, now); got != tc.want {
			t.Errorf("lsTime(%v) = %q, want %q", tc.t, got, tc.want)
		}
	}
}

func TestWriteLong(t *testing.T) {
	now := time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC)
	recent := time.Date(2025, 6, 1, 8, 30, 0, 0, time.UTC)
	old := time.Date(2020, 2, 29, 8, 30, 0, 0, time.UTC)
	entries := []api.Entry{
		{Name: "src", Type: "dir", Mode: 0o040755, Size: 4096, Mtime: recent, Nlink: 12, UID: 1000, GID: 1000},
		{Name: "main.go", Type: "file", Mode: 0o100644, Size: 123, Mtime: old, Nlink: 1, UID: 0, GID: 0},
		{Name: "link", Type: "symlink", Mode: 0o120777, Size: 7, Mtime: recent, Nlink: 1, UID: 1000, GID: 100, Target: "main.go"},
		{Name: "evil\x1b[2Jname", Type: "file", Mode: 0o100600, Size: 0, Mtime: recent, Nlink: 1, UID: 1000, GID: 1000},
	}
	var buf bytes.Buffer
	if err := writeLong(&buf, entries, now); err != nil {
		t.Fatal(err)
	}
	want := `drwxr-xr-x 12 1000 1000 4096 Jun  1 08:30 src
-rw-r--r--  1    0    0  123 Feb 29  2020 main.go
lrwxrwxrwx  1 1000  100    7 Jun  1 08:30 link -> main.go
-rw-------  1 1000 1000    0 Jun  1 08:30 "evil\x1b[2Jname"
`
	if got := buf.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestHumanUnits(t *testing.T) {
	bytesCases := []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.00 KiB"},
		{1536, "1.50 KiB"},
		{1 << 30, "1.00 GiB"},
		{5 << 40, "5.00 TiB"},
	}
	for _, tc := range bytesCases {
		if got := humanBytes(tc.n); got != tc.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	rateCases := []struct {
		r    float64
		want string
	}{
		{0, "0.0 B/s"},
		{512, "512.0 B/s"},
		{832.1 * (1 << 20), "832.1 MiB/s"},
		{2.5 * (1 << 30), "2.5 GiB/s"},
	}
	for _, tc := range rateCases {
		if got := humanRate(tc.r); got != tc.want {
			t.Errorf("humanRate(%v) = %q, want %q", tc.r, got, tc.want)
		}
	}
}

func TestTransferSummary(t *testing.T) {
	res := &api.TransferResult{Dest: "/dst", Files: 10000, TotalBytes: 1 << 30, Bytes: 1 << 30, Elapsed: 1.23, Rate: 832.1 * (1 << 20)}
	want := "pulled 10000 files (1.00 GiB) to /dst in 1.23 s, 832.1 MiB/s (resumed 0 B, skipped 0)"
	if got := transferSummary("pulled", "/fallback", res); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	res = &api.TransferResult{Files: 1, Bytes: 2048, Resumed: 1024, Skipped: 3, Elapsed: 2}
	want = "sent 1 file (3.00 KiB) to desk:proj/x in 2.00 s, 1.0 KiB/s (resumed 1.00 KiB, skipped 3)"
	if got := transferSummary("sent", "desk:proj/x", res); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestDisplayName(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain.txt", "plain.txt"},
		{"with space", "with space"},
		{"ünïcödé", "ünïcödé"},
		{"tab\there", `"tab\there"`},
		{"bad\xffutf8", `"bad\xffutf8"`},
		{"esc\x1b]0;title\x07", `"esc\x1b]0;title\a"`},
	}
	for _, tc := range cases {
		if got := displayName(tc.in); got != tc.want {
			t.Errorf("displayName(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestFormatStatus(t *testing.T) {
	now := time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC)
	st := &api.StatusResult{
		Name: "laptop", Listen: "[::]:7462",
		Peers: []api.PeerStatus{
			{Name: "desktop", Addr: "192.0.2.1:7462", Connected: true, Since: now.Add(-90 * time.Second),
				RTTMicros: 420, TLS: "TLS 1.3", Cipher: "TLS_AES_128_GCM_SHA256", KeyExch: "X25519MLKEM768", Protocol: 1,
				BytesIn: 1 << 30, BytesOut: 3 << 20, Rekeys: 2,
				Transfers: []api.TransferStatus{{Kind: "pull", Remote: "desktop:projects/x", Local: "/home/u/x",
					Started: now.Add(-5 * time.Second), Bytes: 12 << 20, Total: 1 << 30, Files: 10, FilesDone: 3}}},
			{Name: "server", LastError: "dial tcp 192.0.2.2:7462: connection refused"},
			{Name: "phone", Connected: true, Path: api.PathRelayed, Via: "peerfs-relay://relay.example.org:443/?id=X",
				RemoteAddr: "198.51.100.7:443"},
			{Name: "nas", LastError: "192.0.2.9:7462 (config): connection refused; relay peerfs-relay://r:443/?id=X: not there",
				Candidates: []api.CandidateStatus{
					{Addr: "192.0.2.9:7462", Source: "config", Tried: now, Error: "connection refused"},
					{Addr: "peerfs-relay://r:443/?id=X", Source: "relay", Tried: now, Error: "not there"},
					{Addr: "10.0.0.9:7462", Source: "lan"}}},
		},
		Relays: []api.RelayStatus{
			{URL: "peerfs-relay://relay.example.org:443/?id=X", Connected: true, Transport: "websocket", Observed: "203.0.113.5:40000"},
			{URL: "peerfs-relay://r:443/?id=X", LastError: "connection refused"},
		},
	}
	got := formatStatus(st, now)
	for _, want := range []string{
		"device  " + st.DeviceID.String() + " (laptop)",
		"listen  [::]:7462",
		"peer desktop  " + st.Peers[0].DeviceID.Short() + "  connected for 1m30s",
		"rtt        0.42 ms",
		"tls        TLS 1.3, TLS_AES_128_GCM_SHA256, X25519MLKEM768",
		"protocol   1",
		"rekeys     2",
		"traffic    in 1.00 GiB, out 3.00 MiB",
		"transfer   pull desktop:projects/x -> /home/u/x: 12.00 MiB of 1.00 GiB, 3 of 10 files, started 5s ago",
		"peer server",
		"not connected",
		"error      dial tcp 192.0.2.2:7462: connection refused",
		"address    - (waits for the peer to connect)",
		"relay   peerfs-relay://relay.example.org:443/?id=X  connected over websocket, seen as 203.0.113.5:40000\n",
		"relay   peerfs-relay://r:443/?id=X  not connected: connection refused\n",
		"path       relayed via peerfs-relay://relay.example.org:443/?id=X (relay at 198.51.100.7:443)",
		"tried      192.0.2.9:7462 (config): connection refused",
		"tried      peerfs-relay://r:443/?id=X (relay): not there",
		"candidate  10.0.0.9:7462 (lan), not tried yet",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "error      192.0.2.9") {
		t.Errorf("the candidates' errors are shown twice:\n%s", got)
	}
}
