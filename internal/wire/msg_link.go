package wire

import (
	"encoding/binary"
	"fmt"
)

// Hello is the first frame each side sends after the TLS handshake (tag 0, no flags).
type Hello struct {
	MinVersion  uint16
	MaxVersion  uint16
	MaxFrameLen uint32 // the largest payload the sender accepts
	Name        string // the sender's human-readable device name, informative only
}

func (m *Hello) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.b = append(e.b, Magic...)
	e.u16(m.MinVersion)
	e.u16(m.MaxVersion)
	e.u32(m.MaxFrameLen)
	e.str(m.Name)
	return e.b
}

func (m *Hello) Decode(b []byte) error {
	d := decoder{b: b}
	if magic := d.take(len(Magic), "magic"); d.err == nil && string(magic) != Magic {
		return fmt.Errorf("%w: bad magic %q: the peer does not speak the peerfs protocol", ErrMalformed, magic)
	}
	m.MinVersion = d.u16("min version")
	m.MaxVersion = d.u16("max version")
	m.MaxFrameLen = d.u32("max frame length")
	m.Name = d.str("name", MaxNameLen)
	if d.err == nil && m.MinVersion > m.MaxVersion {
		return fmt.Errorf("%w: version range %d-%d is empty", ErrMalformed, m.MinVersion, m.MaxVersion)
	}
	return d.done("HELLO")
}

// NegotiateVersion picks the highest version both sides speak, or fails with a message that
// says which side to upgrade.
func NegotiateVersion(ours, theirs Hello) (uint16, error) {
	v := min(ours.MaxVersion, theirs.MaxVersion)
	if v < max(ours.MinVersion, theirs.MinVersion) {
		return 0, fmt.Errorf("no common protocol version: we speak %d-%d, the peer speaks %d-%d; upgrade the older peerfs",
			ours.MinVersion, ours.MaxVersion, theirs.MinVersion, theirs.MaxVersion)
	}
	return v, nil
}

// PingLen is the payload length of PING and PONG: the sender's monotonic clock in nanoseconds,
// echoed back unchanged.
const PingLen = 8

// Credit is the body of a CREDIT frame: more bytes the stream's sender may send.
type Credit struct{ Bytes uint32 }

const CreditLen = 4

func (m *Credit) AppendTo(b []byte) []byte { return binary.BigEndian.AppendUint32(b, m.Bytes) }

func (m *Credit) Decode(b []byte) error {
	if len(b) != CreditLen {
		return fmt.Errorf("%w: CREDIT is %d bytes, want %d", ErrMalformed, len(b), CreditLen)
	}
	m.Bytes = binary.BigEndian.Uint32(b)
	return nil
}

// ErrorMsg is the body of an ERROR frame and of a CLOSE frame.
type ErrorMsg struct {
	Code    Errno
	Message string
}

func (m *ErrorMsg) AppendTo(b []byte) []byte {
	e := encoder{b}
	e.u32(uint32(m.Code))
	msg := m.Message
	if len(msg) > MaxMessageLen {
		msg = msg[:MaxMessageLen]
	}
	e.str(msg)
	return e.b
}

func (m *ErrorMsg) Decode(b []byte) error {
	d := decoder{b: b}
	m.Code = Errno(d.u32("code"))
	m.Message = d.str("message", MaxMessageLen)
	return d.done("ERROR")
}
