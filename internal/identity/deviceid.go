package identity

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// DeviceID names a device: the SHA-256 of its raw 32-byte Ed25519 public
// key. It is what users compare and what peers pin; no CA is involved.
type DeviceID [32]byte

var (
	// ErrBadDeviceID is wrapped by every error from ParseDeviceID.
	ErrBadDeviceID = errors.New("invalid device ID")
	// ErrNotEd25519 is returned for certificates whose key is not Ed25519.
	ErrNotEd25519 = errors.New("certificate key is not Ed25519")
)

const (
	alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" // RFC 4648 base32

	dataLen    = 52 // base32 of 32 bytes, unpadded
	groupLen   = 13 // data characters per check character
	groups     = dataLen / groupLen
	checkedLen = dataLen + groups // 56
	blockLen   = 7                // printed block size
	blocks     = checkedLen / blockLen
)

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewDeviceID returns the device ID of an Ed25519 public key.
func NewDeviceID(pub ed25519.PublicKey) DeviceID {
	return DeviceID(sha256.Sum256(pub))
}

// DeviceIDFromCert returns the device ID of the certificate's key.
func DeviceIDFromCert(cert *x509.Certificate) (DeviceID, error) {
	pub, ok := cert.PublicKey.(ed25519.PublicKey)
	if !ok || len(pub) != ed25519.PublicKeySize {
		return DeviceID{}, fmt.Errorf("%w (got %v)", ErrNotEd25519, cert.PublicKeyAlgorithm)
	}
	return NewDeviceID(pub), nil
}

// String returns the 63-character human form: 8 blocks of 7 characters
// separated by dashes, each group of 13 base32 characters followed by a
// check character so that a single mistyped character is caught.
func (id DeviceID) String() string {
	data := b32.EncodeToString(id[:])
	var checked strings.Builder
	checked.Grow(checkedLen)
	for g := range groups {
		part := data[g*groupLen : (g+1)*groupLen]
		checked.WriteString(part)
		checked.WriteByte(luhn(alphabet, part))
	}
	s := checked.String()

	var out strings.Builder
	out.Grow(checkedLen + blocks - 1)
	for b := range blocks {
		if b > 0 {
			out.WriteByte('-')
		}
		out.WriteString(s[b*blockLen : (b+1)*blockLen])
	}
	return out.String()
}

// Short returns the first block of the human form, enough to tell devices
// apart in logs and listings but not to authenticate them.
func (id DeviceID) Short() string {
	return id.String()[:blockLen]
}

// MarshalText implements encoding.TextMarshaler using the full human form.
func (id DeviceID) MarshalText() ([]byte, error) {
	return []byte(id.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it accepts what
// ParseDeviceID accepts.
func (id *DeviceID) UnmarshalText(b []byte) error {
	parsed, err := ParseDeviceID(string(b))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

// ParseDeviceID parses the human form. It is lenient about presentation
// (case, dashes, spaces, and the look-alikes 0, 1 and 8 for O, I and B)
// and strict about content: every check character must match.
func ParseDeviceID(s string) (DeviceID, error) {
	norm := make([]byte, 0, checkedLen)
	for _, r := range s {
		switch {
		case r == '-' || unicode.IsSpace(r):
			continue
		case r == '0':
			r = 'O'
		case r == '1':
			r = 'I'
		case r == '8':
			r = 'B'
		case r >= 'a' && r <= 'z':
			r -= 'a' - 'A'
		}
		if r > unicode.MaxASCII || strings.IndexByte(alphabet, byte(r)) < 0 {
			return DeviceID{}, fmt.Errorf("%w %q: character %q cannot appear in a device ID (only A-Z and 2-7): copy it again from the output of \"peerfs id\" on that device", ErrBadDeviceID, s, r)
		}
		norm = append(norm, byte(r))
	}

	switch len(norm) {
	case checkedLen:
	case dataLen:
		// Same length as the bare base32 string: accepting it would skip
		// the typo check entirely, so refuse rather than guess.
		return DeviceID{}, fmt.Errorf("%w %q: it has %d characters and no check characters: use the full 56-character form (8 blocks of 7) printed by \"peerfs id\" on that device", ErrBadDeviceID, s, dataLen)
	default:
		return DeviceID{}, fmt.Errorf("%w %q: it has %d characters, want %d (8 blocks of 7): copy it again from the output of \"peerfs id\" on that device", ErrBadDeviceID, s, len(norm), checkedLen)
	}

	data := make([]byte, 0, dataLen)
	for g := range groups {
		part := string(norm[g*(groupLen+1) : g*(groupLen+1)+groupLen])
		if norm[g*(groupLen+1)+groupLen] != luhn(alphabet, part) {
			// Group g covers printed blocks 2g+1 and 2g+2.
			return DeviceID{}, fmt.Errorf("%w %q: typo in block %d or %d (check character mismatch): compare it again with the output of \"peerfs id\" on that device", ErrBadDeviceID, s, 2*g+1, 2*g+2)
		}
		data = append(data, part...)
	}

	var id DeviceID
	n, err := b32.Decode(id[:], data)
	// The last character carries one bit of the ID and four padding bits.
	// The decoder ignores padding bits, so re-encode to insist they are
	// zero and every ID has exactly one accepted spelling.
	if err != nil || n != len(id) || b32.EncodeToString(id[:]) != string(data) {
		return DeviceID{}, fmt.Errorf("%w %q: block %d is not a canonical encoding: compare it again with the output of \"peerfs id\" on that device", ErrBadDeviceID, s, blocks)
	}
	return id, nil
}

// luhn returns the Luhn mod N check character of s over the given
// alphabet (N = len(alphabet)). It catches every single-character
// substitution and most swaps of adjacent characters. s must consist of
// alphabet characters only.
func luhn(alphabet, s string) byte {
	n := len(alphabet)
	sum := 0
	factor := 2 // the rightmost payload character is doubled
	for i := len(s) - 1; i >= 0; i-- {
		v := factor * strings.IndexByte(alphabet, s[i])
		sum += v/n + v%n
		factor = 3 - factor
	}
	return alphabet[(n-sum%n)%n]
}
