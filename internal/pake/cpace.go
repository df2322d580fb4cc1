// Package pake implements CPace, the balanced password-authenticated key exchange of the
// CFRG draft draft-irtf-cfrg-cpace (CPACE-RISTR255-SHA512: the ristretto255 group of RFC 9496
// and SHA-512), in the initiator-responder setting, with the explicit key confirmation the
// draft recommends in its section "Key confirmation".
//
// Two parties that share a low-entropy password (PRS), a channel identifier (CI) and a
// session identifier (sid) each send one 32-byte share; each derives the same intermediate
// session key (ISK) if and only if both used the same password, CI, sid and saw the same
// transcript. An active attacker gets one password guess per run; a passive one gets none.
// Nothing here knows sockets: the caller carries the messages.
//
// Constant time: the generator is derived from the password by hashing and ristretto255's
// element derivation, and scalar multiplications use gtank/ristretto255's constant-time
// ScalarMult; the confirmation tags are compared with hmac.Equal. Only public values (shares,
// transcripts) are compared or branched on otherwise.
package pake

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha512"
	"errors"
	"io"

	"github.com/gtank/ristretto255"
)

// Specification constants (draft-irtf-cfrg-cpace, sections "CPace cipher suites" and
// "CPace group objects G_Ristretto255").
const (
	// DSI is G_Ristretto255.DSI, the domain separation identifier of the group.
	DSI = "CPaceRistretto255"
	// ShareLen is the length of an encoded ristretto255 element, the message each side sends.
	ShareLen = 32
	// ISKLen is the length of the intermediate session key: SHA-512's output.
	ISKLen = sha512.Size
	// TagLen is the length of a key confirmation tag, HMAC-SHA-512.
	TagLen = sha512.Size
	// hashBlockLen is SHA-512's input block size, H.s_in_bytes, which sizes the zero padding.
	hashBlockLen = 128
)

// ErrBadShare means the peer's share is not the encoding of a ristretto255 element, or
// the shared point is the identity: the run MUST abort (draft, "CPace protocol instructions").
var ErrBadShare = errors.New("pake: the peer's share is invalid")

// ErrConfirmation means the peer's key confirmation tag is wrong: the two sides do not hold
// the same key, because the passwords differ or someone changed the messages in between.
var ErrConfirmation = errors.New("pake: key confirmation failed: the codes differ or the messages were changed on the way")

// Role says which side of the initiator-responder setting a party plays: the initiator's
// share and associated data come first in the transcript.
type Role int

const (
	Initiator Role = iota // A in the draft
	Responder             // B in the draft
)

// Inputs are what both parties must agree on before the run, and the party's own
// associated data. CI and SID may hold identities and channel bindings: they are never
// sent; AD is sent in clear alongside the share by the caller.
type Inputs struct {
	Password []byte // PRS
	CI       []byte // channel identifier, secret or public, never sent
	SID      []byte // session identifier, public and unique per session
	AD       []byte // this party's associated data (ADa or ADb)
}

// Party is one side of a CPace run.
type Party struct {
	role  Role
	in    Inputs
	y     *ristretto255.Scalar
	share []byte
	isk   []byte
	peer  struct{ share, ad []byte }
}

// New starts a run: it derives the generator from the inputs, draws the secret scalar from
// rand (crypto/rand if nil) and computes this party's share, which Share returns.
func New(role Role, in Inputs, random io.Reader) (*Party, error) {
	if random == nil {
		random = rand.Reader
	}
	var b [32]byte
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return nil, err
	}
	return newWithScalar(role, in, b)
}

// newWithScalar is New with the scalar given as 32 random bytes; the test vectors use it.
// sample_scalar: clear the bits above G.group_size_bits (252), read little-endian. The
// result is below 2^252 < the group order, so it is a canonical encoding.
func newWithScalar(role Role, in Inputs, b [32]byte) (*Party, error) {
	b[31] &= 0x0f
	y := ristretto255.NewScalar()
	if err := y.Decode(b[:]); err != nil {
		return nil, err // unreachable: b is below the group order
	}
	g := generator(in.Password, in.CI, in.SID)
	share := ristretto255.NewElement().ScalarMult(y, g).Encode(nil)
	return &Party{role: role, in: in, y: y, share: share}, nil
}

// Share is this party's message: Ya for the initiator, Yb for the responder.
func (p *Party) Share() []byte { return p.share }

// Finish takes the peer's share and associated data and derives the ISK. It fails with
// ErrBadShare if the share does not decode or the shared point is the identity.
func (p *Party) Finish(peerShare, peerAD []byte) error {
	k, ok := scalarMultVfy(p.y, peerShare)
	if !ok {
		return ErrBadShare
	}
	p.peer.share = append([]byte(nil), peerShare...)
	p.peer.ad = append([]byte(nil), peerAD...)
	ya, ada, yb, adb := p.share, p.in.AD, p.peer.share, p.peer.ad
	if p.role == Responder {
		ya, ada, yb, adb = yb, adb, ya, ada
	}
	p.isk = isk(p.in.SID, k, transcriptIR(ya, ada, yb, adb))
	return nil
}

// ISK is the intermediate session key, valid after Finish. Use Key to derive keys from it.
func (p *Party) ISK() []byte { return p.isk }

// Confirmation is this party's key confirmation tag, valid after Finish (draft, "Key
// confirmation"): MAC(mac_key, lv_cat(own share, own AD)) with
// mac_key = H(b"CPaceMac" || sid || ISK) and MAC = HMAC-SHA-512.
func (p *Party) Confirmation() []byte {
	return confirmationTag(p.macKey(), p.share, p.in.AD)
}

// Verify checks the peer's key confirmation tag in constant time; a mismatch is
// ErrConfirmation and the caller MUST NOT use the key.
func (p *Party) Verify(tag []byte) error {
	if p.isk == nil || !hmac.Equal(tag, confirmationTag(p.macKey(), p.peer.share, p.peer.ad)) {
		return ErrConfirmation
	}
	return nil
}

// Key derives n bytes for purpose from the ISK with HKDF-SHA-512 (the draft recommends a
// KDF before the ISK is used; RFC 5869), the sid as salt and purpose as info.
func (p *Party) Key(purpose string, n int) ([]byte, error) {
	return hkdf.Key(sha512.New, p.isk, p.in.SID, purpose, n)
}

func (p *Party) macKey() []byte {
	h := sha512.New()
	h.Write([]byte("CPaceMac"))
	h.Write(p.in.SID)
	h.Write(p.isk)
	return h.Sum(nil)
}

func confirmationTag(macKey, share, ad []byte) []byte {
	m := hmac.New(sha512.New, macKey)
	m.Write(lvCat(share, ad))
	return m.Sum(nil)
}

// generator is G.calculate_generator: element_derivation(H(generator_string(...), 64)).
func generator(prs, ci, sid []byte) *ristretto255.Element {
	h := sha512.Sum512(generatorString([]byte(DSI), prs, ci, sid, hashBlockLen))
	return ristretto255.NewElement().FromUniformBytes(h[:])
}

// generatorString is lv_cat(DSI, PRS, zero_bytes(len_zpad), CI, sid), the padding making
// DSI and PRS fill the first hash block so that short passwords hash in constant work.
func generatorString(dsi, prs, ci, sid []byte, blockLen int) []byte {
	zpad := max(0, blockLen-1-len(prependLen(prs))-len(prependLen(dsi)))
	return lvCat(dsi, prs, make([]byte, zpad), ci, sid)
}

// scalarMultVfy is G.scalar_mult_vfy: encode(y * decode(X)), false where X does not decode
// or the result is the identity (G.I, 32 zero bytes).
func scalarMultVfy(y *ristretto255.Scalar, x []byte) ([]byte, bool) {
	e := ristretto255.NewElement()
	if len(x) != ShareLen || e.Decode(x) != nil {
		return nil, false
	}
	k := ristretto255.NewElement().ScalarMult(y, e)
	if k.Equal(ristretto255.NewElement().Zero()) == 1 {
		return nil, false
	}
	return k.Encode(nil), true
}

// isk is H(lv_cat(DSI || "_ISK", sid, K) || transcript).
func isk(sid, k, transcript []byte) []byte {
	h := sha512.New()
	h.Write(lvCat([]byte(DSI+"_ISK"), sid, k))
	h.Write(transcript)
	return h.Sum(nil)
}

// transcriptIR is transcript_ir(Ya, ADa, Yb, ADb) = lv_cat(Ya, ADa) || lv_cat(Yb, ADb).
func transcriptIR(ya, ada, yb, adb []byte) []byte {
	return append(lvCat(ya, ada), lvCat(yb, adb)...)
}

// prependLen prefixes data with its length in LEB128.
func prependLen(data []byte) []byte {
	var out []byte
	n := len(data)
	for {
		if n < 128 {
			out = append(out, byte(n))
		} else {
			out = append(out, byte(n&0x7f|0x80))
		}
		n >>= 7
		if n == 0 {
			break
		}
	}
	return append(out, data...)
}

// lvCat concatenates its arguments, each prefixed with its length.
func lvCat(args ...[]byte) []byte {
	var out []byte
	for _, a := range args {
		out = append(out, prependLen(a)...)
	}
	return out
}
