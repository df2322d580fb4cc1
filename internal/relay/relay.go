// Package relay is a rendezvous point and byte splicer for devices that cannot dial each other:
// two devices each connect to the relay, name the same rendezvous identifier, and the relay
// pairs their connections and from then on copies bytes between them. Its one job is that
// pairing and splicing. It never sees plaintext: the two devices run their own mutual TLS 1.3
// (internal/transport, pinned device IDs) inside the relayed stream, and the relay knows no
// device IDs, only identifiers that rotate and that only the two devices can compute
// (rendezvous.go).
//
// A connection to the relay goes through these stages (docs/PROTOCOL.md, "Relay"):
//
//  1. The device opens TCP (or a WebSocket, websocket.go) to the relay and runs TLS 1.3 with
//     X25519MLKEM768, pinning the relay's device ID from its URL (url.go).
//  2. It sends JOIN: a role (listen or dial), the access token if any, and rendezvous IDs.
//  3. When a join of the other role names one of the same IDs, the relay answers both with
//     PAIRED (with the address it sees each device from) and closes its TLS session with
//     close_notify; each device answers with its own close_notify. Neither side reads past
//     that alert (record.go), so the TCP stream goes on as a raw byte stream.
//  4. The relay splices the two raw streams (pump.go): splice(2) between two TCP sockets on
//     Linux, so a relayed byte costs no user-space copy and no cipher work at the relay.
//
// Client (client.go) is the device side: Dial returns the raw stream, which the caller hands to
// transport.Client or transport.Server.
package relay

import (
	"errors"
	"fmt"
)

// Protocol constants (docs/PROTOCOL.md, "Relay").
const (
	// ALPN is the TLS application protocol of a device's relay connection.
	ALPN = "peerfs-relay/1"
	// alpnHTTP selects a WebSocket upgrade inside the relay's TLS (websocket.go).
	alpnHTTP = "http/1.1"
	// WebSocketPath is where the relay accepts WebSocket upgrades.
	WebSocketPath = "/relay"
	// DefaultPort is the port a relay URL without one means: 443, which networks that let
	// out only HTTPS still pass.
	DefaultPort = "443"

	joinMagic  = "PFRJ"
	replyMagic = "PFRR"
	version    = 1

	// IDLen is the length of a rendezvous identifier in bytes.
	IDLen = 16
	// MaxJoinIDs bounds the IDs of one join: a listening device names every peer it waits
	// for, three epochs each (rendezvous.go); 512 covers 170 peers.
	MaxJoinIDs = 512
	// MaxTokenLen bounds the access token (its length travels in one byte).
	MaxTokenLen = 255
	// maxMessageLen bounds a refusal's text.
	maxMessageLen = 1024
)

// Role says which side of a rendezvous a join is: a listening device waits for dialling
// peers; a dialling device names the one peer it wants.
type Role byte

const (
	RoleListen Role = 1
	RoleDial   Role = 2
)

func (r Role) String() string {
	switch r {
	case RoleListen:
		return "listen"
	case RoleDial:
		return "dial"
	}
	return fmt.Sprintf("role(%d)", byte(r))
}

func (r Role) other() Role {
	if r == RoleListen {
		return RoleDial
	}
	return RoleListen
}

// Code is the relay's answer to a join.
type Code byte

// Reply codes (docs/PROTOCOL.md, "REPLY").
const (
	CodePaired   Code = 0 // paired: raw bytes follow
	CodeFull     Code = 1 // the relay holds as many sessions or waiting joins as it may
	CodeToken    Code = 2 // the access token is missing or wrong
	CodeTimeout  Code = 3 // no join of the other role came within the pending-join timeout
	CodeReplaced Code = 4 // a newer join of the same role took these IDs over
	CodeBadJoin  Code = 5 // the join is malformed
	CodeClosing  Code = 6 // the relay is shutting down
)

// Errors a client branches on; each wraps the relay's reason.
var (
	ErrRelayFull    = errors.New("relay is full")
	ErrRelayToken   = errors.New("relay refused the access token")
	ErrNoPartner    = errors.New("no peer joined at the relay in time")
	ErrReplaced     = errors.New("a newer join took this rendezvous over")
	ErrBadJoin      = errors.New("relay refused the join as malformed")
	ErrRelayClosing = errors.New("relay is shutting down")
	ErrWrongRelay   = errors.New("wrong relay")
	ErrRelayRefused = errors.New("relay refused the connection")
)

// refusal is the one-line error, with what to do, for a code the relay sent.
func refusal(c Code, msg string) error {
	switch c {
	case CodeFull:
		return fmt.Errorf("%w (%s): try again in a minute, or use another relay", ErrRelayFull, msg)
	case CodeToken:
		return fmt.Errorf("%w (%s): it is private; ask its operator for the token and add \"&token=TOKEN\" to the relay URL", ErrRelayToken, msg)
	case CodeTimeout:
		return fmt.Errorf("%w (%s): check that the peer is running and uses the same relay", ErrNoPartner, msg)
	case CodeReplaced:
		return fmt.Errorf("%w (%s): another connection of this device, or a stale one, waits there now", ErrReplaced, msg)
	case CodeBadJoin:
		return fmt.Errorf("%w (%s): the relay and this device speak different relay protocol versions; upgrade the older one", ErrBadJoin, msg)
	case CodeClosing:
		return fmt.Errorf("%w (%s): try again later or use another relay", ErrRelayClosing, msg)
	}
	return fmt.Errorf("%w with unknown code %d (%s): upgrade this device", ErrRelayRefused, byte(c), msg)
}
