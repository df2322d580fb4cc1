// Package transport sets up the TLS links between devices. Links are
// TLS 1.3 only, mutually authenticated, and pinned by device ID: there is
// no CA, a peer is whoever holds the key its device ID was derived from.
// The hybrid post-quantum key exchange X25519MLKEM768 is required, so
// recorded traffic stays confidential against a future quantum attacker.
package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
)

// KeyExchange is the only key exchange group peerfs negotiates.
const KeyExchange = tls.X25519MLKEM768

// DefaultHandshakeTimeout applies when Config.HandshakeTimeout is zero.
const DefaultHandshakeTimeout = 10 * time.Second

var (
	// ErrUntrusted means the peer's device ID is not in our trust list.
	ErrUntrusted = errors.New("not trusted")
	// ErrWrongPeer means the device at the dialled address is not the
	// one we expected there.
	ErrWrongPeer = errors.New("wrong device")
	// ErrNoPQ means the peer cannot or did not negotiate X25519MLKEM768
	// over TLS 1.3.
	ErrNoPQ = errors.New("peerfs requires X25519MLKEM768")
	// ErrRefusedByPeer means the peer rejected our certificate, usually
	// because it does not trust our device ID yet.
	ErrRefusedByPeer = errors.New("peer refused our certificate")
)

// Config holds what both ends of a link need.
type Config struct {
	// Identity is this device's identity; it must be set.
	Identity *identity.Identity
	// Trusted lists the devices that may connect; it is asked at every
	// handshake. A nil Trusted trusts nobody.
	Trusted func() []identity.DeviceID
	// Unproven, if set, is asked about a ClientHello without the hello tag
	// of a trusted device (hellotag.go) and may let its handshake go on as a
	// provisional link (provisional.go): any device's certificate is then
	// accepted and the Conn is marked Provisional. Pairing uses it while a
	// pairing waits; nil refuses them all.
	Unproven func(*tls.ClientHelloInfo) bool
	// Admitted, if set, is told of each ClientHello the accepting side lets
	// go on (hello.Context() is the context given to Server), so that a
	// caller capping handshakes in progress can tell a peer's from a
	// stranger's idle connection.
	Admitted func(*tls.ClientHelloInfo)
	// HandshakeTimeout bounds connection setup: the TCP connect plus the
	// TLS handshake in Dial, the TLS handshake in Server. Zero means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
}

func (c *Config) timeout() time.Duration {
	if c.HandshakeTimeout > 0 {
		return c.HandshakeTimeout
	}
	return DefaultHandshakeTimeout
}

func (c *Config) trusted(id identity.DeviceID) bool {
	return c.Trusted != nil && slices.Contains(c.Trusted(), id)
}

// Info describes the negotiated security parameters of a link.
type Info struct {
	Version     string `json:"version"`      // "TLS 1.3"
	CipherSuite string `json:"cipher_suite"` // e.g. "TLS_AES_128_GCM_SHA256"
	Group       string `json:"key_exchange"` // "X25519MLKEM768"
}

func infoOf(st tls.ConnectionState) Info {
	return Info{
		Version:     tls.VersionName(st.Version),
		CipherSuite: tls.CipherSuiteName(st.CipherSuite),
		Group:       st.CurveID.String(),
	}
}

// Conn is an established, verified link to a peer.
type Conn struct {
	*tls.Conn
	Peer     identity.DeviceID
	Info     Info
	Outbound bool // we dialled it
	// Provisional marks a link whose peer's certificate was accepted without
	// trust: one admitted through Config.Unproven, or dialled with
	// DialProvisional. Peer is the device ID its certificate proves; nothing
	// else about it is known, and it must not be served as a trusted peer's.
	Provisional bool

	self identity.DeviceID
	w    *writer
}

// Read is tls.Conn.Read with a refusal by the peer reported as
// ErrRefusedByPeer. In TLS 1.3 the client's handshake is over before the
// server has checked the client certificate, so a dialler learns that it
// was refused only from its first read.
func (c *Conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		err = explainRemote(err, c.self)
	}
	return n, err
}

func baseTLS(c *Config) *tls.Config {
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		MaxVersion:       tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{KeyExchange},
		Certificates:     []tls.Certificate{c.Identity.Cert},
	}
}

// ServerTLS returns the TLS configuration for the accepting side. It aborts
// a handshake whose ClientHello lacks a trusted device's hello tag before
// sending anything (hellotag.go), asks for a client certificate and accepts
// it if its device ID is trusted. It
// can be used with tls.Server directly; Server adds the timeout and a
// post-handshake check.
func ServerTLS(c *Config) *tls.Config {
	cfg := baseTLS(c)
	cfg.ClientAuth = tls.RequireAnyClientCert
	// Resumed sessions skip VerifyPeerCertificate; every link does a full
	// handshake so the peer proves its key each time.
	cfg.SessionTicketsDisabled = true
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		// Before anything of ours, the certificate above all, leaves.
		provisional, err := c.admitHello(hello)
		if err != nil {
			return nil, err
		}
		if c.Admitted != nil {
			c.Admitted(hello)
		}
		// Without this the handshake would fail anyway, but only with a
		// bare "no ECDHE curve" error that does not say what to do.
		if !slices.Contains(hello.SupportedCurves, KeyExchange) {
			return nil, fmt.Errorf("peer offered only classical key exchange (%s): %w; upgrade the peer", curveNames(hello.SupportedCurves), ErrNoPQ)
		}
		if provisional {
			return provisionalServerTLS(c), nil
		}
		return nil, nil
	}
	cfg.VerifyPeerCertificate = func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
		id, err := peerID(rawCerts)
		if err != nil {
			return err
		}
		if !c.trusted(id) {
			return untrusted(id)
		}
		return nil
	}
	return cfg
}

// ClientTLS returns the TLS configuration for dialling the device expect.
// Normal chain verification is off because there is no CA; instead the
// server's certificate key must hash to expect, which must be trusted.
func ClientTLS(c *Config, expect identity.DeviceID) *tls.Config {
	cfg := baseTLS(c)
	cfg.InsecureSkipVerify = true // replaced by the device ID pinning below
	cfg.ServerName = helloTag(c.Identity.ID, expect, helloEpoch(time.Now()))
	cfg.VerifyPeerCertificate = func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
		id, err := peerID(rawCerts)
		if err != nil {
			return err
		}
		if id != expect {
			return fmt.Errorf("%w: expected %s but the peer is %s: the address now belongs to a different device; check the peer's address and device ID", ErrWrongPeer, expect, id)
		}
		if !c.trusted(id) {
			return untrusted(id)
		}
		return nil
	}
	return cfg
}

// peerID derives the device ID from the leaf certificate. Validity dates
// are deliberately ignored: trust rests on the key, and device clocks are
// often wrong. Possession of the key is proven by the handshake itself.
func peerID(rawCerts [][]byte) (identity.DeviceID, error) {
	if len(rawCerts) == 0 {
		return identity.DeviceID{}, errors.New("peer sent no certificate")
	}
	cert, err := x509.ParseCertificate(rawCerts[0])
	if err != nil {
		return identity.DeviceID{}, fmt.Errorf("peer certificate: %w", err)
	}
	id, err := identity.DeviceIDFromCert(cert)
	if err != nil {
		return identity.DeviceID{}, fmt.Errorf("peer certificate: %w", err)
	}
	return id, nil
}

func untrusted(id identity.DeviceID) error {
	return fmt.Errorf("device ID %s is %w: add it with \"peerfs peer add %s --name NAME\"", id, ErrUntrusted, id)
}

func curveNames(curves []tls.CurveID) string {
	if len(curves) == 0 {
		return "none"
	}
	names := make([]string, len(curves))
	for i, c := range curves {
		names[i] = c.String()
	}
	return strings.Join(names, ", ")
}

// Listen opens a plain TCP listener. Hand each accepted connection to
// Server in its own goroutine so that a slow handshake never stalls the
// accept loop.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Dial connects to addr and returns a link verified to lead to expect.
func Dial(ctx context.Context, addr string, c *Config, expect identity.DeviceID) (*Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()

	var d net.Dialer // default keepalive
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	conn, err := Client(ctx, raw, c, expect)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	return conn, nil
}

// Client runs the dialling side of the handshake on raw, a stream already connected to the
// device expect (a TCP connection, or a stream spliced through a relay), and returns the
// verified link. raw is closed on failure.
func Client(ctx context.Context, raw net.Conn, c *Config, expect identity.DeviceID) (*Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()

	if tc, ok := raw.(*net.TCPConn); ok {
		// Small request/response messages must not wait for Nagle.
		tc.SetNoDelay(true)
	}
	co := &coalescer{Conn: raw}
	return handshake(ctx, tls.Client(co, ClientTLS(c, expect)), co, c, true)
}

// Server runs the server side of the handshake on an accepted connection
// and returns the verified link. raw is closed on failure.
func Server(ctx context.Context, raw net.Conn, c *Config) (*Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()

	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	co := &coalescer{Conn: raw}
	conn, err := handshake(ctx, tls.Server(co, ServerTLS(c)), co, c, false)
	if err != nil {
		return nil, fmt.Errorf("TLS handshake with %s: %w", raw.RemoteAddr(), err)
	}
	// Only a hello admitted through Unproven gets past the trust check with an
	// untrusted certificate (provisional.go); a trusted device that dialled
	// with such a hello is provisional too, so that the caller hands the link
	// to whatever opened that path.
	conn.Provisional = !c.provenHello(conn.ConnectionState().ServerName, time.Now())
	return conn, nil
}

// handshake completes tc within ctx and checks the result; tc is closed on
// failure.
func handshake(ctx context.Context, tc *tls.Conn, co *coalescer, c *Config, outbound bool) (*Conn, error) {
	if err := tc.HandshakeContext(ctx); err != nil {
		tc.Close()
		if ctx.Err() == context.DeadlineExceeded && errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("handshake timed out after %v: %w", c.timeout(), err)
		}
		return nil, explainRemote(err, c.Identity.ID)
	}

	st := tc.ConnectionState()
	// The configuration already allows nothing else; this guards against
	// a change there or in crypto/tls silently weakening links.
	if st.Version != tls.VersionTLS13 || st.CurveID != KeyExchange {
		tc.Close()
		return nil, fmt.Errorf("negotiated %s with %s key exchange: %w; upgrade the peer", tls.VersionName(st.Version), st.CurveID, ErrNoPQ)
	}
	if len(st.PeerCertificates) == 0 {
		tc.Close()
		return nil, errors.New("peer sent no certificate")
	}
	peer, err := identity.DeviceIDFromCert(st.PeerCertificates[0])
	if err != nil {
		tc.Close()
		return nil, err
	}
	return &Conn{
		Conn:     tc,
		Peer:     peer,
		Info:     infoOf(st),
		Outbound: outbound,
		self:     c.Identity.ID,
		w:        &writer{co: co},
	}, nil
}

// TLS alerts that arrive from the peer, as defined in RFC 8446.
const (
	alertHandshakeFailure       tls.AlertError = 40
	alertBadCertificate         tls.AlertError = 42
	alertUnsupportedCertificate tls.AlertError = 43
	alertCertificateUnknown     tls.AlertError = 46
	alertProtocolVersion        tls.AlertError = 70
	alertInsufficientSecurity   tls.AlertError = 71
	alertInternalError          tls.AlertError = 80
	alertCertificateRequired    tls.AlertError = 116
)

// remoteAlert returns the alert the peer sent, if err is one. crypto/tls
// reports received alerts as a *net.OpError whose Err has an unexported
// type but the same text as the matching tls.AlertError.
func remoteAlert(err error) (tls.AlertError, bool) {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil {
		return 0, false
	}
	text := op.Err.Error()
	for _, a := range []tls.AlertError{
		alertHandshakeFailure, alertBadCertificate, alertUnsupportedCertificate,
		alertCertificateUnknown, alertProtocolVersion, alertInsufficientSecurity,
		alertCertificateRequired, alertInternalError,
	} {
		if a.Error() == text {
			return a, true
		}
	}
	return 0, false
}

// explainRemote turns an alert from the peer, which carries no reason,
// into an error saying what most likely happened and what to do.
func explainRemote(err error, self identity.DeviceID) error {
	a, ok := remoteAlert(err)
	if !ok {
		return err
	}
	switch a {
	case alertBadCertificate, alertUnsupportedCertificate, alertCertificateUnknown, alertCertificateRequired:
		return fmt.Errorf("%w (%w): ask its owner to run \"peerfs peer add %s --name NAME\"", ErrRefusedByPeer, err, self)
	case alertInternalError:
		// crypto/tls answers this way when the accepting side's check of the
		// ClientHello (the hello tag) refuses it.
		return fmt.Errorf("%w at our first message (%w): it does not trust our device ID, or the device at that address is another one, "+
			"or the two clocks are more than an hour apart; ask its owner to run \"peerfs peer add %s --name NAME\", and check the address and both clocks",
			ErrRefusedByPeer, err, self)
	case alertHandshakeFailure, alertProtocolVersion, alertInsufficientSecurity:
		// Between peers that both speak TLS 1.3 with default cipher
		// suites, the key exchange group is what is left to disagree on.
		return fmt.Errorf("peer could not agree on TLS 1.3 with X25519MLKEM768 (%w): %w; upgrade the peer", err, ErrNoPQ)
	}
	return err
}
