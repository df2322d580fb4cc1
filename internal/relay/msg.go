package relay

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
)

// Join is a device's request (docs/PROTOCOL.md, "JOIN").
type Join struct {
	Role  Role
	Token string
	IDs   []ID
}

func (j *Join) check() error {
	switch {
	case j.Role != RoleListen && j.Role != RoleDial:
		return fmt.Errorf("unknown role %d", byte(j.Role))
	case len(j.IDs) == 0:
		return fmt.Errorf("no rendezvous ID")
	case j.Role == RoleDial && len(j.IDs) != 1:
		return fmt.Errorf("a dialling join names one rendezvous ID, not %d", len(j.IDs))
	case len(j.IDs) > MaxJoinIDs:
		return fmt.Errorf("%d rendezvous IDs, more than %d", len(j.IDs), MaxJoinIDs)
	case len(j.Token) > MaxTokenLen:
		return fmt.Errorf("token longer than %d bytes", MaxTokenLen)
	}
	return nil
}

// encode lays j out as:
//
//	"PFRJ" | version (1) | role (1) | token length (1) | token | ID count (2) | IDs (16 each)
func (j *Join) encode() []byte {
	b := make([]byte, 0, 10+len(j.Token)+len(j.IDs)*IDLen)
	b = append(b, joinMagic...)
	b = append(b, version, byte(j.Role), byte(len(j.Token)))
	b = append(b, j.Token...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(j.IDs)))
	for _, id := range j.IDs {
		b = append(b, id[:]...)
	}
	return b
}

func readJoin(r io.Reader) (*Join, error) {
	var head [7]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	if string(head[:4]) != joinMagic {
		return nil, fmt.Errorf("not a join")
	}
	if head[4] != version {
		return nil, fmt.Errorf("relay protocol version %d, this relay speaks %d", head[4], version)
	}
	j := &Join{Role: Role(head[5])}
	tok := make([]byte, head[6])
	if _, err := io.ReadFull(r, tok); err != nil {
		return nil, err
	}
	j.Token = string(tok)
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	count := int(binary.BigEndian.Uint16(n[:]))
	if count > MaxJoinIDs {
		return nil, fmt.Errorf("%d rendezvous IDs, more than %d", count, MaxJoinIDs)
	}
	j.IDs = make([]ID, count)
	for i := range j.IDs {
		if _, err := io.ReadFull(r, j.IDs[i][:]); err != nil {
			return nil, err
		}
	}
	return j, j.check()
}

// reply is the relay's answer (docs/PROTOCOL.md, "REPLY"):
//
//	"PFRR" | code (1) | code 0: matched ID (16) | address length (1) | observed address
//	                  | other:  message length (2) | message (UTF-8)
type reply struct {
	Code     Code
	Matched  ID
	Observed netip.AddrPort
	Message  string
}

func (r *reply) encode() []byte {
	b := append([]byte(replyMagic), byte(r.Code))
	if r.Code == CodePaired {
		b = append(b, r.Matched[:]...)
		a := r.Observed.String()
		b = append(b, byte(len(a)))
		return append(b, a...)
	}
	m := r.Message
	if len(m) > maxMessageLen {
		m = m[:maxMessageLen]
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
	return append(b, m...)
}

func readReply(r io.Reader) (*reply, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	if string(head[:4]) != replyMagic {
		return nil, fmt.Errorf("the relay's answer is not a relay reply")
	}
	rp := &reply{Code: Code(head[4])}
	if rp.Code == CodePaired {
		var b [IDLen + 1]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, err
		}
		copy(rp.Matched[:], b[:IDLen])
		a := make([]byte, b[IDLen])
		if _, err := io.ReadFull(r, a); err != nil {
			return nil, err
		}
		ap, err := netip.ParseAddrPort(string(a))
		if err != nil {
			return nil, fmt.Errorf("observed address %q: %v", a, err)
		}
		rp.Observed = ap
		return rp, nil
	}
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	l := int(binary.BigEndian.Uint16(n[:]))
	if l > maxMessageLen {
		return nil, fmt.Errorf("refusal message of %d bytes, more than %d", l, maxMessageLen)
	}
	m := make([]byte, l)
	if _, err := io.ReadFull(r, m); err != nil {
		return nil, err
	}
	rp.Message = string(m)
	return rp, nil
}
