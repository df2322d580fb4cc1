package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
)

// TestStrangerGetsNoCertificate: a TLS client without the hello tag of a trusted device
// dialling this one gets no certificate: the handshake ends before any Certificate message,
// so the client's certificate callback is never called.
func TestStrangerGetsNoCertificate(t *testing.T) {
	srv, cli, stranger := newIdentity(t), newIdentity(t), newIdentity(t)
	now := helloEpoch(time.Now())
	for _, tc := range []struct {
		name       string
		id         *identity.Identity
		serverName string
	}{
		{"no server name", stranger, ""},
		{"a host name", stranger, "example.org"},
		{"random tag", stranger, strings.Repeat("ab", 16)},
		{"the stranger's own tag", stranger, helloTag(stranger.ID, srv.ID, now)},
		{"a trusted device's tag for another device", stranger, helloTag(cli.ID, stranger.ID, now)},
		{"a trusted device's tag three hours old", stranger, helloTag(cli.ID, srv.ID, now-3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, res := serve(t, &Config{Identity: srv, Trusted: trust(cli)})
			var certs atomic.Int32
			conn, err := tls.Dial("tcp", addr, &tls.Config{
				MinVersion:         tls.VersionTLS13,
				Certificates:       []tls.Certificate{tc.id.Cert},
				InsecureSkipVerify: true,
				ServerName:         tc.serverName,
				VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
					certs.Add(int32(len(raw)))
					return nil
				},
			})
			if err == nil {
				conn.Close()
				t.Fatal("the stranger completed a handshake")
			}
			if n := certs.Load(); n > 0 {
				t.Fatalf("the stranger received %d certificates", n)
			}
			if serr := wait(t, res).err; !errors.Is(serr, ErrUntrusted) {
				t.Errorf("server err = %v, want ErrUntrusted", serr)
			}
		})
	}
}

// TestHelloTagClockSkew: tags of the previous, current and next hour are accepted (clocks
// up to an hour apart), older or newer ones not.
func TestHelloTagClockSkew(t *testing.T) {
	srv, cli := newIdentity(t), newIdentity(t)
	c := &Config{Identity: srv, Trusted: trust(cli)}
	now := time.Now()
	e := helloEpoch(now)
	for d, want := range map[int64]bool{-2: false, -1: true, 0: true, 1: true, 2: false} {
		if got := c.provenHello(helloTag(cli.ID, srv.ID, e+d), now); got != want {
			t.Errorf("tag of epoch %+d accepted = %v, want %v", d, got, want)
		}
	}
	if c.provenHello(helloTag(srv.ID, cli.ID, e), now) {
		t.Error("a tag for the other direction was accepted")
	}
}

// TestUnprovenHook: the hook for devices not trusted yet sees the ClientHello and may let
// the handshake go on; the certificate checks still apply.
func TestUnprovenHook(t *testing.T) {
	srv, cli := newIdentity(t), newIdentity(t)
	var asked atomic.Int32
	addr, res := serve(t, &Config{Identity: srv, Trusted: trust(cli), Unproven: func(h *tls.ClientHelloInfo) bool {
		asked.Add(1)
		return h.ServerName == "pairing"
	}})
	var certs atomic.Int32
	conn, err := tls.Dial("tcp", addr, &tls.Config{
		Certificates:       []tls.Certificate{cli.Cert},
		InsecureSkipVerify: true,
		ServerName:         "pairing",
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			certs.Add(int32(len(raw)))
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	wait(t, res)
	if asked.Load() != 1 || certs.Load() == 0 {
		t.Fatalf("hook asked %d times, %d certificates received; want 1 and the server's", asked.Load(), certs.Load())
	}
}
