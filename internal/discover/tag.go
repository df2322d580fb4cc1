package discover

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/transport"
)

// Protocol constants of the announcement (docs/PROTOCOL.md, "LAN discovery").
const (
	// ServiceType is the DNS-SD service type peerfs announces and browses.
	ServiceType = "_peerfs._tcp"
	// DefaultEpoch is how long a peer tag stays the same.
	DefaultEpoch = time.Hour
	// epochSkew is how many epochs the two clocks may differ by: a browser accepts the
	// tags of the previous, the current and the next epoch.
	epochSkew = 1
	// TagLen is the length of a peer tag: 16 hexadecimal digits, 64 bits of an HMAC.
	TagLen = 16
	// MinTagLen and MaxTagLen bound a tag given to AnnounceTag or Lookup.
	MinTagLen = 8
	MaxTagLen = 63

	peerKeyLabel = "peerfs lan key v1"
	peerTagLabel = "peerfs lan tag v1"
)

// PeerKey is the key of the tags announcer announces for browser, its trusted peer:
//
//	with a pairing secret: HMAC-SHA-256(secret, "peerfs lan key v1" || 0x00 || announcer ID || browser ID)
//	without one:           transport.PairKey(announcer, browser)
//
// Without a secret the key follows from the two device IDs alone, which are not secret:
// anyone who knows both IDs can compute the tags and so recognise the device on a LAN.
// With one (set when the two paired) only the two devices can.
func PeerKey(announcer, browser identity.DeviceID, secret []byte) []byte {
	if len(secret) == 0 {
		return transport.PairKey(announcer, browser)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(peerKeyLabel))
	mac.Write([]byte{0})
	mac.Write(announcer[:])
	mac.Write(browser[:])
	return mac.Sum(nil)
}

// Tag is the tag under key for epoch: the first 8 bytes of
// HMAC-SHA-256(key, "peerfs lan tag v1" || 0x00 || epoch as 8 bytes big-endian), in lower-case
// hexadecimal (TagLen digits).
func Tag(key []byte, epoch int64) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(peerTagLabel))
	mac.Write([]byte{0})
	var e [8]byte
	binary.BigEndian.PutUint64(e[:], uint64(epoch))
	mac.Write(e[:])
	return hex.EncodeToString(mac.Sum(nil)[:TagLen/2])
}

// EpochAt is the epoch number of t for epochs of length d (DefaultEpoch when 0): whole
// epochs since the Unix epoch.
func EpochAt(t time.Time, d time.Duration) int64 {
	if d <= 0 {
		d = DefaultEpoch
	}
	return t.UnixNano() / int64(d)
}

// CheckTag reports why tag cannot be announced or looked up: it must be MinTagLen to
// MaxTagLen characters of [a-z0-9].
func CheckTag(tag string) error {
	if len(tag) < MinTagLen || len(tag) > MaxTagLen {
		return fmt.Errorf("discovery tag %q: %d characters, want %d to %d", tag, len(tag), MinTagLen, MaxTagLen)
	}
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return fmt.Errorf("discovery tag %q: character %q is not a lower-case letter or digit", tag, c)
		}
	}
	return nil
}
