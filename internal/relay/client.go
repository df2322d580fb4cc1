package relay

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/transport"
)

// Transport is how a device reaches a relay.
type Transport int

const (
	// TransportTLS is TCP with TLS straight to the relay: spliced in the kernel there.
	TransportTLS Transport = iota
	// TransportWebSocket is a WebSocket inside the relay's TLS, for networks that let out only
	// HTTPS (websocket.go).
	TransportWebSocket
	// TransportPlainWebSocket is a WebSocket in clear, to a TLS-terminating proxy in front
	// of the relay; the relay's TLS inside still pins its ID.
	TransportPlainWebSocket
)

// Options tune Dial; the zero value is raw TLS over TCP.
type Options struct {
	Transport Transport
	// DialContext opens the connection to the relay; nil is a net.Dialer's.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// JoinTimeout bounds connect, handshake and join, not the wait for the partner (ctx
	// bounds that); zero is DefaultJoinTimeout.
	JoinTimeout time.Duration
	// Joined, if set, is called once the join has been sent and the relay's TLS checked:
	// from then on the device waits at the relay for its partner (a listening device is
	// reachable there).
	Joined func()
}

// Session is a paired stream to a peer through a relay. Conn carries raw bytes end to end:
// run transport.Client (the dialling device) or transport.Server (the listening device) on
// it. Observed is the address the relay saw this device at; Matched the rendezvous ID the
// relay paired on (for a listening device: which peer, through ListenIDs' order).
type Session struct {
	net.Conn
	Observed netip.AddrPort
	Matched  ID
}

// Dial joins the rendezvous ids at the relay u in role and waits, until ctx ends, for a join
// of the other role; it returns the spliced stream. A dialling device names one ID
// (DialID), a listening device all it waits on (ListenIDs).
func Dial(ctx context.Context, u URL, role Role, ids []ID, opts *Options) (*Session, error) {
	if opts == nil {
		opts = &Options{}
	}
	j := &Join{Role: role, Token: u.Token, IDs: ids}
	if err := j.check(); err != nil {
		return nil, fmt.Errorf("relay join: %w", err)
	}
	joinTimeout := opts.JoinTimeout
	if joinTimeout <= 0 {
		joinTimeout = DefaultJoinTimeout
	}
	dial := opts.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	where := "relay " + u.Host

	sctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	var conn net.Conn
	var err error
	switch opts.Transport {
	case TransportWebSocket, TransportPlainWebSocket:
		conn, err = dialWebSocket(sctx, u, opts.Transport == TransportWebSocket, dial)
		where += " (WebSocket)"
	default:
		conn, err = dial(sctx, "tcp", u.Host)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", where, explainHandshake(err))
	}
	tc := tls.Client(&recordConn{Conn: conn}, clientTLS(u, ALPN))
	if err := tc.HandshakeContext(sctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("TLS with %s: %w", where, explainHandshake(err))
	}
	st := tc.ConnectionState()
	if st.CurveID != transport.KeyExchange || st.NegotiatedProtocol != ALPN {
		conn.Close()
		return nil, fmt.Errorf("%s negotiated %s, protocol %q: %w; it is not a peerfs relay or needs an upgrade", where, st.CurveID, st.NegotiatedProtocol, transport.ErrNoPQ)
	}
	// The wait for the partner is bounded by ctx alone; closing the connection ends it.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if _, err := tc.Write(j.encode()); err != nil {
		conn.Close()
		return nil, fmt.Errorf("join at %s: %w", where, err)
	}
	if opts.Joined != nil {
		opts.Joined()
	}
	rp, err := readReply(tc)
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("waiting at %s for the peer: %w", where, ctx.Err())
		}
		return nil, fmt.Errorf("join at %s: the relay closed the connection: %w", where, err)
	}
	if rp.Code != CodePaired {
		conn.Close()
		return nil, fmt.Errorf("%s: %w", where, refusal(rp.Code, rp.Message))
	}
	// The relay's close_notify ends its TLS; ours answers it. recordConn kept crypto/tls
	// from reading past that alert, so conn goes on with the peer's first raw byte.
	conn.SetDeadline(time.Now().Add(joinTimeout))
	var b [1]byte
	if n, err := tc.Read(b[:]); n != 0 || err != io.EOF {
		conn.Close()
		return nil, fmt.Errorf("%s did not end its TLS after pairing (%v): it is not a peerfs relay", where, err)
	}
	if err := tc.CloseWrite(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("ending TLS with %s: %w", where, err)
	}
	conn.SetDeadline(time.Time{})
	if !stop() {
		conn.Close()
		return nil, ctx.Err()
	}
	return &Session{Conn: conn, Observed: rp.Observed, Matched: rp.Matched}, nil
}

// clientTLS is a device's TLS to the relay u: TLS 1.3, X25519MLKEM768, the relay's key pinned
// to u.ID. The device shows no certificate: the relay does not need to know it.
func clientTLS(u URL, proto string) *tls.Config {
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS13,
		MaxVersion:         tls.VersionTLS13,
		CurvePreferences:   []tls.CurveID{transport.KeyExchange},
		NextProtos:         []string{proto},
		InsecureSkipVerify: true, // replaced by the pinning below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return fmt.Errorf("%w: it sent no certificate", ErrWrongRelay)
			}
			cert, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return fmt.Errorf("relay certificate: %w", err)
			}
			id, err := identity.DeviceIDFromCert(cert)
			if err != nil {
				return fmt.Errorf("relay certificate: %w", err)
			}
			if id != u.ID {
				return fmt.Errorf("%w: the URL pins %s but the relay at %s is %s: check the relay URL with its operator", ErrWrongRelay, u.ID, u.Host, id)
			}
			return nil
		},
	}
	if host, _, err := net.SplitHostPort(u.Host); err == nil {
		if _, err := netip.ParseAddr(host); err != nil {
			cfg.ServerName = host
		}
	}
	return cfg
}

// explainHandshake says what a refused handshake most likely means.
func explainHandshake(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		// The relay aborts at the ClientHello when this address holds as many
		// connections as it allows.
		return fmt.Errorf("%w at the handshake (%w): too many connections from this address, "+
			"or it does not speak TLS 1.3 with X25519MLKEM768; close other connections to it or try later", ErrRelayRefused, err)
	}
	return err
}
