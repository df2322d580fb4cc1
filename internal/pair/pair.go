// Package pair runs the pairing of two devices by a short code over a provisional TLS link
// (transport.DialProvisional, transport.Config.Unproven): CPace (internal/pake) with the
// code as password, bound to the link by its TLS exporter and both device IDs, then key
// confirmation both ways, then the exchange of the names the devices chose. It decides
// whether the device at the other end of the link is the one the user gave the code to;
// it writes nothing: the caller (internal/node) pins the peer's device ID afterwards.
//
// The exchange, in order (docs/PROTOCOL.md, "Pairing"):
//
//  1. dialler → listener  SHARE    Ya, the dialler's CPace share
//  2. listener → dialler  SHARE    Yb
//  3. dialler → listener  CONFIRM  Ta; the listener checks it and answers FAIL if wrong
//  4. listener → dialler  CONFIRM  Tb; the dialler checks it and answers FAIL if wrong
//  5. dialler → listener  HELLO    the dialler's chosen name and listening port
//  6. listener → dialler  HELLO    the listener's
//
// Either side may send FAIL instead of its next message, with a reason, and close.
package pair

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/pake"
	"github.com/peerfs/peerfs/internal/transport"
)

// Protocol constants.
const (
	// ExporterLabel is the TLS exporter label (RFC 8446, section 7.5) of the channel binding.
	ExporterLabel = "EXPORTER-peerfs-pair-v1"
	// exporterLen is the length of the exported channel binding, the CPace sid.
	exporterLen = 32
	// adDialler and adListener are the CPace associated data of each role: the role and the
	// protocol version, so that neither can be taken for the other.
	adDialler  = "peerfs pair v1 dialler"
	adListener = "peerfs pair v1 listener"
	// secretInfo is the HKDF info of the shared secret derived from the ISK.
	secretInfo = "peerfs pair secret v1"
	// SecretLen is the length of the secret the two devices share after pairing.
	SecretLen = 32
	// maxMessage bounds a message's payload, in bytes: the longest is HELLO, a name of at
	// most 64 bytes and a port in JSON.
	maxMessage = 1024
)

// Message types.
const (
	msgShare   byte = 1
	msgConfirm byte = 2
	msgHello   byte = 3
	msgFail    byte = 4
)

// Failure reasons carried by FAIL.
const (
	reasonWrongCode      = "wrong_code"
	reasonAlreadyTrusted = "already_trusted"
	reasonProtocol       = "protocol"
)

// Tuning constants.
const (
	// Timeout bounds one exchange once the link is up: six small messages.
	Timeout = 30 * time.Second
)

var (
	// ErrWrongCode means key confirmation failed: the two sides did not use the same code,
	// or someone between them changed the messages. The code is used up.
	ErrWrongCode = errors.New("wrong code")
	// ErrAlreadyTrusted means the two devices already trust each other.
	ErrAlreadyTrusted = errors.New("already trusted")
	// ErrProtocol means the peer broke the exchange.
	ErrProtocol = errors.New("pairing protocol violation")
)

// Role is which side of the link a device is on.
type Role int

const (
	Dialler  Role = iota // typed the code and dialled (CPace initiator, A)
	Listener             // showed the code and accepted (CPace responder, B)
)

// Hello is what each side tells the other once both are confirmed.
type Hello struct {
	Name string `json:"name"`           // the device's own name, suggested as its peer name
	Port int    `json:"port,omitempty"` // the port its daemon listens on for peers; 0: none
}

// Result is a confirmed pairing.
type Result struct {
	Peer   identity.DeviceID // proven by the TLS handshake, confirmed by the code
	Hello  Hello             // what the peer told about itself
	Secret []byte            // SecretLen bytes only the two devices know
}

// Options are a run's inputs besides the link.
type Options struct {
	Role  Role
	Code  Code
	Hello Hello
	// Trusted reports whether a device is trusted already; such a pairing ends with
	// ErrAlreadyTrusted on both sides before the code is tried.
	Trusted func(identity.DeviceID) bool
}

// Run pairs over conn, a provisional link, and returns the confirmed peer. Any error means
// nothing is confirmed; the code must not be tried again (one attempt per code). conn is not
// closed.
func Run(ctx context.Context, conn *transport.Conn, o Options) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	res, err := run(conn, o)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrWrongCode) {
		return nil, fmt.Errorf("pairing with %s: %w", conn.RemoteAddr(), ctx.Err())
	}
	return res, err
}

func run(conn *transport.Conn, o Options) (*Result, error) {
	st := conn.ConnectionState()
	if o.Trusted != nil && o.Trusted(conn.Peer) {
		fail(conn, reasonAlreadyTrusted)
		return nil, fmt.Errorf("device %s is %w", conn.Peer, ErrAlreadyTrusted)
	}
	sid, err := st.ExportKeyingMaterial(ExporterLabel, nil, exporterLen)
	if err != nil {
		return nil, fmt.Errorf("TLS exporter: %w", err)
	}
	// The draft puts identities that both sides know at the start in CI, the dialler's
	// first ("Party identifiers"): here the device IDs the certificates proved.
	local := conn.Local()
	dialler, listener := local, conn.Peer
	role, ad, peerAD := pake.Initiator, adDialler, adListener
	if o.Role == Listener {
		dialler, listener = conn.Peer, local
		role, ad, peerAD = pake.Responder, adListener, adDialler
	}
	ci := append(append([]byte("peerfs pair v1\x00"), dialler[:]...), listener[:]...)
	p, err := pake.New(role, pake.Inputs{Password: o.Code.password(), CI: ci, SID: sid, AD: []byte(ad)}, nil)
	if err != nil {
		return nil, err
	}

	var peerShare []byte
	if o.Role == Dialler {
		if err := send(conn, msgShare, p.Share()); err != nil {
			return nil, err
		}
		if peerShare, err = expect(conn, msgShare); err != nil {
			return nil, err
		}
	} else {
		if peerShare, err = expect(conn, msgShare); err != nil {
			return nil, err
		}
		if err := send(conn, msgShare, p.Share()); err != nil {
			return nil, err
		}
	}
	if err := p.Finish(peerShare, []byte(peerAD)); err != nil {
		fail(conn, reasonProtocol)
		return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
	}

	// Confirmation: the dialler shows its tag first; the listener answers with its own only
	// if the dialler's is right, so a wrong guess learns nothing more.
	if o.Role == Dialler {
		if err := send(conn, msgConfirm, p.Confirmation()); err != nil {
			return nil, err
		}
		if err := confirm(conn, p); err != nil {
			return nil, err
		}
	} else {
		if err := confirm(conn, p); err != nil {
			return nil, err
		}
		if err := send(conn, msgConfirm, p.Confirmation()); err != nil {
			return nil, err
		}
	}

	mine, err := json.Marshal(o.Hello)
	if err != nil {
		return nil, err
	}
	var theirs []byte
	if o.Role == Dialler {
		if err := send(conn, msgHello, mine); err != nil {
			return nil, err
		}
		theirs, err = expect(conn, msgHello)
	} else {
		if theirs, err = expect(conn, msgHello); err == nil {
			err = send(conn, msgHello, mine)
		}
	}
	if err != nil {
		return nil, err
	}
	res := &Result{Peer: conn.Peer}
	if err := json.Unmarshal(theirs, &res.Hello); err != nil {
		return nil, fmt.Errorf("%w: HELLO is not JSON: %v", ErrProtocol, err)
	}
	if res.Secret, err = p.Key(secretInfo, SecretLen); err != nil {
		return nil, err
	}
	return res, nil
}

// confirm reads the peer's CONFIRM and checks it; a wrong tag is answered with FAIL.
func confirm(conn *transport.Conn, p *pake.Party) error {
	tag, err := expect(conn, msgConfirm)
	if err != nil {
		return err
	}
	if p.Verify(tag) != nil {
		fail(conn, reasonWrongCode)
		return ErrWrongCode
	}
	return nil
}

// send writes one message: type (1 byte), payload length (2 bytes, big-endian), payload.
func send(w io.Writer, typ byte, payload []byte) error {
	msg := make([]byte, 3+len(payload))
	msg[0] = typ
	binary.BigEndian.PutUint16(msg[1:3], uint16(len(payload)))
	copy(msg[3:], payload)
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("sending to the other device: %w", err)
	}
	return nil
}

// expect reads one message of type typ; FAIL becomes the error it names.
func expect(conn net.Conn, typ byte) ([]byte, error) {
	var h [3]byte
	if _, err := io.ReadFull(conn, h[:]); err != nil {
		return nil, fmt.Errorf("the other device closed the pairing: %w", err)
	}
	n := int(binary.BigEndian.Uint16(h[1:]))
	if n > maxMessage {
		fail(conn, reasonProtocol)
		return nil, fmt.Errorf("%w: message of %d bytes", ErrProtocol, n)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(conn, payload); err != nil {
		return nil, fmt.Errorf("the other device closed the pairing: %w", err)
	}
	switch {
	case h[0] == msgFail:
		switch string(payload) {
		case reasonWrongCode:
			return nil, ErrWrongCode
		case reasonAlreadyTrusted:
			return nil, fmt.Errorf("the other device: this one is %w there", ErrAlreadyTrusted)
		}
		return nil, fmt.Errorf("%w: the other device gave up (%q)", ErrProtocol, payload)
	case h[0] != typ:
		fail(conn, reasonProtocol)
		return nil, fmt.Errorf("%w: message type %d where %d was due", ErrProtocol, h[0], typ)
	}
	return payload, nil
}

// fail tells the peer why the pairing ends; errors are ignored, the link closes anyway.
func fail(w io.Writer, reason string) { send(w, msgFail, []byte(reason)) }
