package punch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
)

// The messages two devices exchange over a link they already have (a relayed one) to
// coordinate a punch (docs/PROTOCOL.md, "Punch messages"). All integers are big-endian.
//
//	Version (uint8) | Type (uint8) | Attempt (uint32) | body
//	CANDIDATES body: Count (uint8) | Count x (Kind (uint8) | Family (uint8: 4 or 6) | Address (4 or 16 bytes) | Port (uint16))
//	START body:      empty
//
// On a stream each message is preceded by its length (uint16): WriteMessage, ReadMessage.

// Protocol constants.
const (
	// MsgVersion is the version of the punch messages.
	MsgVersion = 1
	// MaxCandidates bounds the candidates of one message: a device has a few interface
	// addresses and one observed address per relay.
	MaxCandidates = 16
	// MaxMsgLen bounds an encoded message: the header (6 bytes), the count and
	// MaxCandidates IPv6 candidates (20 bytes each) fit.
	MaxMsgLen = 6 + 1 + MaxCandidates*20
)

// MsgType is the type of a punch message.
type MsgType uint8

const (
	// MsgCandidates carries the addresses where the sender can be punched to.
	MsgCandidates MsgType = 1
	// MsgStart says: punch now. Its sender punches half a round trip later.
	MsgStart MsgType = 2
)

func (t MsgType) String() string {
	switch t {
	case MsgCandidates:
		return "CANDIDATES"
	case MsgStart:
		return "START"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// CandidateKind says where a candidate address comes from.
type CandidateKind uint8

const (
	// CandidateObserved is the sender's address and listening port as a relay saw them
	// (its public mapping, behind a NAT).
	CandidateObserved CandidateKind = 1
	// CandidateLocal is an address of one of the sender's own interfaces, with its
	// listening port (the peer may be on the same network).
	CandidateLocal CandidateKind = 2
)

// Candidate is an address a peer may reach the sender at.
type Candidate struct {
	Kind CandidateKind
	Addr netip.AddrPort
}

// Message is one punch message. Candidates is set for MsgCandidates only.
type Message struct {
	Type MsgType
	// Attempt ties a START to the CANDIDATES of the same attempt; the side that opens an
	// attempt picks it, the other answers with the same number.
	Attempt    uint32
	Candidates []Candidate
}

var (
	// ErrMsgVersion means the peer speaks another version of the punch messages.
	ErrMsgVersion = errors.New("unknown punch message version")
	// ErrBadMsg means a punch message is malformed.
	ErrBadMsg = errors.New("malformed punch message")
)

// MarshalBinary encodes m; it fails on what a peer would refuse.
func (m *Message) MarshalBinary() ([]byte, error) {
	b := make([]byte, 6, MaxMsgLen)
	b[0] = MsgVersion
	b[1] = byte(m.Type)
	binary.BigEndian.PutUint32(b[2:], m.Attempt)
	switch m.Type {
	case MsgStart:
		if len(m.Candidates) != 0 {
			return nil, fmt.Errorf("%w: START carries no candidates", ErrBadMsg)
		}
	case MsgCandidates:
		if len(m.Candidates) > MaxCandidates {
			return nil, fmt.Errorf("%w: %d candidates, at most %d", ErrBadMsg, len(m.Candidates), MaxCandidates)
		}
		b = append(b, byte(len(m.Candidates)))
		for _, c := range m.Candidates {
			if err := checkCandidate(c); err != nil {
				return nil, err
			}
			a := c.Addr.Addr()
			if a.Is4() {
				b = append(b, byte(c.Kind), 4)
			} else {
				b = append(b, byte(c.Kind), 6)
			}
			b = append(b, a.AsSlice()...)
			b = binary.BigEndian.AppendUint16(b, c.Addr.Port())
		}
	default:
		return nil, fmt.Errorf("%w: type %d", ErrBadMsg, m.Type)
	}
	return b, nil
}

// UnmarshalBinary decodes a message. It accepts exactly what MarshalBinary produces: an
// unknown version is ErrMsgVersion, anything else out of place ErrBadMsg.
func (m *Message) UnmarshalBinary(b []byte) error {
	if len(b) < 6 {
		return fmt.Errorf("%w: %d bytes, shorter than its header", ErrBadMsg, len(b))
	}
	if b[0] != MsgVersion {
		return fmt.Errorf("%w %d (this device speaks %d): upgrade the older device", ErrMsgVersion, b[0], MsgVersion)
	}
	if len(b) > MaxMsgLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadMsg, len(b), MaxMsgLen)
	}
	*m = Message{Type: MsgType(b[1]), Attempt: binary.BigEndian.Uint32(b[2:])}
	rest := b[6:]
	switch m.Type {
	case MsgStart:
	case MsgCandidates:
		if len(rest) < 1 {
			return fmt.Errorf("%w: CANDIDATES without a count", ErrBadMsg)
		}
		n := int(rest[0])
		rest = rest[1:]
		if n > MaxCandidates {
			return fmt.Errorf("%w: %d candidates, at most %d", ErrBadMsg, n, MaxCandidates)
		}
		m.Candidates = make([]Candidate, 0, n)
		for range n {
			if len(rest) < 2 {
				return fmt.Errorf("%w: truncated candidate", ErrBadMsg)
			}
			kind, family := CandidateKind(rest[0]), rest[1]
			size := 4
			if family == 6 {
				size = 16
			} else if family != 4 {
				return fmt.Errorf("%w: address family %d", ErrBadMsg, family)
			}
			if len(rest) < 2+size+2 {
				return fmt.Errorf("%w: truncated candidate", ErrBadMsg)
			}
			a, _ := netip.AddrFromSlice(rest[2 : 2+size])
			c := Candidate{Kind: kind, Addr: netip.AddrPortFrom(a, binary.BigEndian.Uint16(rest[2+size:]))}
			if err := checkCandidate(c); err != nil {
				return err
			}
			m.Candidates = append(m.Candidates, c)
			rest = rest[2+size+2:]
		}
	default:
		return fmt.Errorf("%w: unknown type %d", ErrBadMsg, b[1])
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d bytes after a %s", ErrBadMsg, len(rest), m.Type)
	}
	return nil
}

func checkCandidate(c Candidate) error {
	if c.Kind != CandidateObserved && c.Kind != CandidateLocal {
		return fmt.Errorf("%w: candidate kind %d", ErrBadMsg, c.Kind)
	}
	a := c.Addr.Addr()
	if !a.IsValid() || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() || c.Addr.Port() == 0 {
		return fmt.Errorf("%w: candidate address %s", ErrBadMsg, c.Addr)
	}
	return nil
}

// WriteMessage writes m to w preceded by its length, in one Write.
func WriteMessage(w io.Writer, m *Message) error {
	b, err := m.MarshalBinary()
	if err != nil {
		return err
	}
	out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(b)), uint16(len(b)))
	if _, err := w.Write(append(out, b...)); err != nil {
		return fmt.Errorf("sending punch %s: %w", m.Type, err)
	}
	return nil
}

// ReadMessage reads one length-prefixed message from r.
func ReadMessage(r io.Reader) (*Message, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, fmt.Errorf("reading punch message: %w", err)
	}
	n := int(binary.BigEndian.Uint16(l[:]))
	if n > MaxMsgLen {
		return nil, fmt.Errorf("%w: length %d, at most %d", ErrBadMsg, n, MaxMsgLen)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("reading punch message: %w", err)
	}
	m := new(Message)
	if err := m.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	return m, nil
}
