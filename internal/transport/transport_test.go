package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
)

func newIdentity(t *testing.T) *identity.Identity {
	t.Helper()
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func trust(ids ...*identity.Identity) func() []identity.DeviceID {
	return func() []identity.DeviceID {
		var out []identity.DeviceID
		for _, id := range ids {
			out = append(out, id.ID)
		}
		return out
	}
}

type serverResult struct {
	conn *Conn
	err  error
}

// serve accepts one connection on a fresh loopback listener and runs
// Server on it, the way an accept loop would.
func serve(t *testing.T, c *Config) (string, <-chan serverResult) {
	t.Helper()
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	res := make(chan serverResult, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			res <- serverResult{err: err}
			return
		}
		conn, err := Server(context.Background(), raw, c)
		res <- serverResult{conn, err}
	}()
	return ln.Addr().String(), res
}

func wait(t *testing.T, res <-chan serverResult) serverResult {
	t.Helper()
	select {
	case r := <-res:
		if r.conn != nil {
			t.Cleanup(func() { r.conn.Close() })
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("server did not finish its handshake")
		return serverResult{}
	}
}

func checkInfo(t *testing.T, side string, info Info) {
	t.Helper()
	if info.Version != "TLS 1.3" {
		t.Errorf("%s: Version = %q, want TLS 1.3", side, info.Version)
	}
	if !strings.HasPrefix(info.CipherSuite, "TLS_AES_") && !strings.HasPrefix(info.CipherSuite, "TLS_CHACHA20_") {
		t.Errorf("%s: CipherSuite = %q, want a TLS 1.3 suite", side, info.CipherSuite)
	}
	if info.Group != "X25519MLKEM768" {
		t.Errorf("%s: Group = %q, want X25519MLKEM768", side, info.Group)
	}
}

func TestLink(t *testing.T) {
	tests := []struct {
		name          string
		serverTrusts  func(srv, cli, other *identity.Identity) func() []identity.DeviceID
		clientTrusts  func(srv, cli, other *identity.Identity) func() []identity.DeviceID
		expect        func(srv, cli, other *identity.Identity) identity.DeviceID
		wantClientErr error // from Dial, or from the first Read if Dial succeeds
		wantServerErr error
	}{
		{
			name:         "trusted pair",
			serverTrusts: func(srv, cli, other *identity.Identity) func() []identity.DeviceID { return trust(cli) },
			clientTrusts: func(srv, cli, other *identity.Identity) func() []identity.DeviceID { return trust(srv) },
			expect:       func(srv, cli, other *identity.Identity) identity.DeviceID { return srv.ID },
		},
		{
			name:          "client unknown to server",
			serverTrusts:  func(srv, cli, other *identity.Identity) func() []identity.DeviceID { return trust(other) },
			clientTrusts:  func(srv, cli, other *identity.Identity) func() []identity.DeviceID { return trust(srv) },
			expect:        func(srv, cli, other *identity.Identity) identity.DeviceID { return srv.ID },
			wantClientErr: ErrRefusedByPeer,
			wantServerErr: ErrUntrusted,
		},
		{
			name:          "server trusts nobody",
			serverTrusts:  func(srv, cli, other *identity.Identity) func() []identity.DeviceID { return nil },
			clientTrusts:  func(srv, cli, other *identity.Identity) func() []identity.DeviceID { return trust(srv) },
			expect:        func(srv, cli, other *identity.Identity) identity.DeviceID { return srv.ID },
			wantClientErr: ErrRefusedByPeer,
			wantServerErr: ErrUntrusted,
		},
		{
			name:          "different device at the address",
			serverTrusts:  func(srv, cli, other *identity.Identity) func() []identity.DeviceID { return trust(cli) },
			clientTrusts:  func(srv, cli, other *identity.Identity) func() []identity.DeviceID { return trust(srv, other) },
			expect:        func(srv, cli, other *identity.Identity) identity.DeviceID { return other.ID },
			wantClientErr: ErrRefusedByPeer, // at the hello tag, which names other
			wantServerErr: ErrUntrusted,
		},
		{
			name:          "expected server no longer trusted",
			serverTrusts:  func(srv, cli, other *identity.Identity) func() []identity.DeviceID { return trust(cli) },
			clientTrusts:  func(srv, cli, other *identity.Identity) func() []identity.DeviceID { return trust(other) },
			expect:        func(srv, cli, other *identity.Identity) identity.DeviceID { return srv.ID },
			wantClientErr: ErrUntrusted,
			wantServerErr: ErrRefusedByPeer,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, cli, other := newIdentity(t), newIdentity(t), newIdentity(t)
			addr, res := serve(t, &Config{Identity: srv, Trusted: tt.serverTrusts(srv, cli, other)})
			ccfg := &Config{Identity: cli, Trusted: tt.clientTrusts(srv, cli, other)}

			conn, clientErr := Dial(context.Background(), addr, ccfg, tt.expect(srv, cli, other))
			if clientErr == nil {
				defer conn.Close()
				if tt.wantClientErr != nil {
					// TLS 1.3: a refused client finds out on its first read.
					conn.SetReadDeadline(time.Now().Add(5 * time.Second))
					_, clientErr = conn.Read(make([]byte, 1))
				}
			}
			sr := wait(t, res)

			if !errors.Is(clientErr, tt.wantClientErr) || (tt.wantClientErr == nil) != (clientErr == nil) {
				t.Errorf("client err = %v, want %v", clientErr, tt.wantClientErr)
			}
			if !errors.Is(sr.err, tt.wantServerErr) || (tt.wantServerErr == nil) != (sr.err == nil) {
				t.Errorf("server err = %v, want %v", sr.err, tt.wantServerErr)
			}
			for _, err := range []error{clientErr, sr.err} {
				if err != nil && strings.Contains(err.Error(), "\n") {
					t.Errorf("error %q spans several lines", err)
				}
			}
			if tt.wantClientErr != nil || tt.wantServerErr != nil {
				return
			}

			if conn.Peer != srv.ID || !conn.Outbound {
				t.Errorf("client sees peer %s outbound=%v, want %s outbound=true", conn.Peer, conn.Outbound, srv.ID)
			}
			if sr.conn.Peer != cli.ID || sr.conn.Outbound {
				t.Errorf("server sees peer %s outbound=%v, want %s outbound=false", sr.conn.Peer, sr.conn.Outbound, cli.ID)
			}
			checkInfo(t, "client", conn.Info)
			checkInfo(t, "server", sr.conn.Info)

			// The link carries data both ways.
			go func() {
				sr.conn.Write([]byte("ping"))
			}()
			buf := make([]byte, 4)
			if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
				t.Fatalf("client read %q, %v", buf, err)
			}
			if _, err := conn.Write([]byte("pong")); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(sr.conn, buf); err != nil || string(buf) != "pong" {
				t.Fatalf("server read %q, %v", buf, err)
			}
		})
	}
}

func TestErrorMessages(t *testing.T) {
	srv, cli, other := newIdentity(t), newIdentity(t), newIdentity(t)

	// The accepting side refuses at the ClientHello, before either certificate: it cannot
	// name the dialler, so the dialler's message names itself and the fix.
	t.Run("untrusted dialler is told its ID and the fix", func(t *testing.T) {
		addr, res := serve(t, &Config{Identity: srv, Trusted: trust(other)})
		_, err := Dial(context.Background(), addr, &Config{Identity: cli, Trusted: trust(srv)}, srv.ID)
		if err == nil {
			t.Fatal("Dial succeeded")
		}
		want := `"peerfs peer add ` + cli.ID.String() + ` --name NAME"`
		if !errors.Is(err, ErrRefusedByPeer) || !strings.Contains(err.Error(), want) {
			t.Errorf("client err = %v, want ErrRefusedByPeer mentioning %s", err, want)
		}
		if err := wait(t, res).err; !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "hello tag") {
			t.Errorf("server err = %v, want ErrUntrusted about the hello tag", err)
		}
	})

	t.Run("wrong peer says what to check", func(t *testing.T) {
		addr, res := serve(t, &Config{Identity: srv, Trusted: trust(cli)})
		_, err := Dial(context.Background(), addr, &Config{Identity: cli, Trusted: trust(other)}, other.ID)
		wait(t, res)
		if err == nil {
			t.Fatal("Dial succeeded")
		}
		for _, s := range []string{"another one", "check the address", addr} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("client err %q does not mention %q", err, s)
			}
		}
	})
}

func TestDefaultClientGetsPQ(t *testing.T) {
	// A stock crypto/tls client offers X25519 and X25519MLKEM768; the
	// server must pick the hybrid.
	srv, cli := newIdentity(t), newIdentity(t)
	addr, res := serve(t, &Config{Identity: srv, Trusted: trust(cli)})
	conn, err := tls.Dial("tcp", addr, &tls.Config{
		Certificates:       []tls.Certificate{cli.Cert},
		InsecureSkipVerify: true,
		ServerName:         helloTag(cli.ID, srv.ID, helloEpoch(time.Now())),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sr := wait(t, res)
	if sr.err != nil {
		t.Fatal(sr.err)
	}
	checkInfo(t, "server", sr.conn.Info)
	if got := conn.ConnectionState().CurveID; got != tls.X25519MLKEM768 {
		t.Errorf("client negotiated %v", got)
	}
}

func TestClassicalClientRefused(t *testing.T) {
	srv, cli := newIdentity(t), newIdentity(t)
	addr, res := serve(t, &Config{Identity: srv, Trusted: trust(cli)})
	conn, clientErr := tls.Dial("tcp", addr, &tls.Config{
		MinVersion:         tls.VersionTLS13,
		CurvePreferences:   []tls.CurveID{tls.X25519},
		Certificates:       []tls.Certificate{cli.Cert},
		InsecureSkipVerify: true,
		ServerName:         helloTag(cli.ID, srv.ID, helloEpoch(time.Now())),
	})
	if clientErr == nil {
		conn.Close()
		t.Error("classical-only client completed its handshake")
	}
	err := wait(t, res).err
	if !errors.Is(err, ErrNoPQ) {
		t.Fatalf("server err = %v, want ErrNoPQ", err)
	}
	for _, s := range []string{"only classical key exchange (X25519)", "X25519MLKEM768", "upgrade the peer"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("server err %q does not mention %q", err, s)
		}
	}
}

func TestClassicalServerRefused(t *testing.T) {
	// A server that can only do X25519 (an old or foreign peer) answers
	// our ClientHello with a bare handshake_failure alert.
	srv, cli := newIdentity(t), newIdentity(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			return
		}
		defer raw.Close()
		tls.Server(raw, &tls.Config{
			MinVersion:       tls.VersionTLS13,
			CurvePreferences: []tls.CurveID{tls.X25519},
			Certificates:     []tls.Certificate{srv.Cert},
		}).Handshake()
	}()
	_, err = Dial(context.Background(), ln.Addr().String(), &Config{Identity: cli, Trusted: trust(srv)}, srv.ID)
	if !errors.Is(err, ErrNoPQ) {
		t.Fatalf("Dial err = %v, want ErrNoPQ", err)
	}
}

func TestHandshakeTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	srv, cli := newIdentity(t), newIdentity(t)

	t.Run("server", func(t *testing.T) {
		addr, res := serve(t, &Config{Identity: srv, Trusted: trust(cli), HandshakeTimeout: timeout})
		start := time.Now()
		raw, err := net.Dial("tcp", addr) // and then say nothing
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		err = wait(t, res).err
		checkTimeout(t, err, time.Since(start), timeout)
	})

	t.Run("client", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			raw, err := ln.Accept() // and then say nothing
			if err != nil {
				return
			}
			defer raw.Close()
			io.Copy(io.Discard, raw)
		}()
		start := time.Now()
		_, err = Dial(context.Background(), ln.Addr().String(), &Config{Identity: cli, Trusted: trust(srv), HandshakeTimeout: timeout}, srv.ID)
		checkTimeout(t, err, time.Since(start), timeout)
	})
}

func checkTimeout(t *testing.T, err error, elapsed, timeout time.Duration) {
	t.Helper()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("err = %v, want a handshake timeout", err)
	}
	if elapsed < timeout-50*time.Millisecond || elapsed > timeout+2*time.Second {
		t.Errorf("gave up after %v, want about %v", elapsed, timeout)
	}
}

func TestConfigs(t *testing.T) {
	id := newIdentity(t)
	c := &Config{Identity: id}
	tests := []struct {
		name string
		cfg  *tls.Config
	}{
		{"server", ServerTLS(c)},
		{"client", ClientTLS(c, id.ID)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg.MinVersion != tls.VersionTLS13 || cfg.MaxVersion != tls.VersionTLS13 {
				t.Errorf("versions %x..%x, want TLS 1.3 only", cfg.MinVersion, cfg.MaxVersion)
			}
			if len(cfg.CurvePreferences) != 1 || cfg.CurvePreferences[0] != tls.X25519MLKEM768 {
				t.Errorf("CurvePreferences = %v, want [X25519MLKEM768]", cfg.CurvePreferences)
			}
			if len(cfg.Certificates) != 1 || cfg.Certificates[0].Leaf != id.Leaf {
				t.Error("own certificate not configured")
			}
			if cfg.VerifyPeerCertificate == nil {
				t.Error("no device ID verification")
			}
		})
	}
	if s := ServerTLS(c); s.ClientAuth != tls.RequireAnyClientCert || s.GetConfigForClient == nil {
		t.Error("server does not require client certificates or check the ClientHello")
	}
	if cl := ClientTLS(c, id.ID); !cl.InsecureSkipVerify {
		t.Error("client would try CA verification")
	}
}

func TestInfoJSON(t *testing.T) {
	b, err := json.Marshal(Info{Version: "TLS 1.3", CipherSuite: "TLS_AES_128_GCM_SHA256", Group: "X25519MLKEM768"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":"TLS 1.3","cipher_suite":"TLS_AES_128_GCM_SHA256","key_exchange":"X25519MLKEM768"}`
	if string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

// TestWriteBuffers: the slices of one WriteBuffers arrive contiguous and in order, even while
// other writers write on the same Conn and each call spans several coalesced socket writes.
func TestWriteBuffers(t *testing.T) {
	srv, cli := newIdentity(t), newIdentity(t)
	addr, res := serve(t, &Config{Identity: srv, Trusted: trust(cli)})
	conn, err := Dial(context.Background(), addr, &Config{Identity: cli, Trusted: trust(srv)}, srv.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sr := wait(t, res)
	if sr.err != nil {
		t.Fatal(sr.err)
	}

	// Each message: a 1-byte writer tag, a 4-byte length, then that many bytes of the tag,
	// the head and the body in two slices like a frame's head and its bulk data.
	const writers, each, bodyLen = 4, 8, coalesceMax + 1000
	done := make(chan error, writers)
	for w := range writers {
		go func() {
			body := bytes.Repeat([]byte{byte('a' + w)}, bodyLen)
			head := []byte{byte('a' + w), 0, 0, 0, 0}
			binary.BigEndian.PutUint32(head[1:], bodyLen)
			for range each {
				n, err := conn.WriteBuffers(head, body)
				if err == nil && n != len(head)+len(body) {
					err = fmt.Errorf("wrote %d bytes, want %d", n, len(head)+len(body))
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	got := map[byte]int{}
	head := make([]byte, 5)
	body := make([]byte, bodyLen)
	for range writers * each {
		if _, err := io.ReadFull(sr.conn, head); err != nil {
			t.Fatal(err)
		}
		n := binary.BigEndian.Uint32(head[1:])
		if n != bodyLen {
			t.Fatalf("message of writer %c says %d bytes, want %d: writes interleaved", head[0], n, bodyLen)
		}
		if _, err := io.ReadFull(sr.conn, body); err != nil {
			t.Fatal(err)
		}
		if i := bytes.IndexFunc(body, func(r rune) bool { return byte(r) != head[0] }); i >= 0 {
			t.Fatalf("message of writer %c has %q at %d: writes interleaved", head[0], body[i], i)
		}
		got[head[0]]++
	}
	for range writers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for w := range writers {
		if got[byte('a'+w)] != each {
			t.Errorf("writer %c: %d messages, want %d", 'a'+w, got[byte('a'+w)], each)
		}
	}
}
