package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"

	"github.com/peerfs/peerfs/internal/identity"
)

// Provisional links carry a pairing (internal/pair): two devices that do not trust each
// other yet open the usual TLS 1.3 link, X25519MLKEM768 required, with each other's
// certificate accepted whatever device it names. Such a link proves only that the peer holds
// the key of the device ID in Conn.Peer; the pairing run over it decides whether that
// device is the one the user meant, and nothing else may use it.
//
// The accepting side opens this path only for a ClientHello its Config.Unproven admits (a
// pairing tag while a pairing waits), so strangers still get no certificate.

// provisionalServerTLS is ServerTLS for a hello admitted through Config.Unproven: any
// client certificate that names a device is accepted.
func provisionalServerTLS(c *Config) *tls.Config {
	cfg := baseTLS(c)
	cfg.ClientAuth = tls.RequireAnyClientCert
	cfg.SessionTicketsDisabled = true
	cfg.VerifyPeerCertificate = func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
		_, err := peerID(rawCerts)
		return err
	}
	return cfg
}

// DialProvisional connects to addr with serverName in the ClientHello's SNI (a pairing tag
// the listener's Unproven hook recognises) and accepts the certificate of whatever device
// answers; the returned Conn is Provisional and its Peer is that device's ID.
func DialProvisional(ctx context.Context, addr string, c *Config, serverName string) (*Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	conn, err := ClientProvisional(ctx, raw, c, serverName)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	return conn, nil
}

// ClientProvisional is DialProvisional's handshake on raw, a stream already connected to the
// device (a TCP connection, or a stream spliced through a relay). raw is closed on failure.
func ClientProvisional(ctx context.Context, raw net.Conn, c *Config, serverName string) (*Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	cfg := baseTLS(c)
	cfg.InsecureSkipVerify = true // no trust yet: the pairing run authenticates the peer
	cfg.ServerName = serverName
	cfg.VerifyPeerCertificate = func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
		_, err := peerID(rawCerts)
		return err
	}
	co := &coalescer{Conn: raw}
	conn, err := handshake(ctx, tls.Client(co, cfg), co, c, true)
	if err != nil {
		return nil, err
	}
	conn.Provisional = true
	return conn, nil
}

// Local is this device's ID, which the link proved to the peer.
func (c *Conn) Local() identity.DeviceID { return c.self }
