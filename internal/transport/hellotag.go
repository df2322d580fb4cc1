package transport

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
)

// The hello tag keeps the accepting side's certificate, which names its device ID and the
// time it was made, from devices that do not show they know whom they are dialling.
//
// In TLS 1.3 the server sends its certificate before it has seen the client's, so without a
// check before that, any TCP client learns them. The dialler therefore puts in the server
// name (SNI) of its ClientHello a tag that only a device knowing both device IDs can compute,
// and the accepting side aborts the handshake at the ClientHello, before its ServerHello,
// unless the tag is that of a trusted device dialling it:
//
//	key = SHA-256("peerfs hello tag v1" || 0x00 || dialler ID || listener ID)
//	tag = hex(first 16 bytes of HMAC-SHA-256(key, epoch as 8 bytes big-endian))
//	epoch = Unix time / 3600 (hours)
//
// What it proves and what not: device IDs are not secrets, so a stranger that knows both IDs
// can compute the tag; and the SNI travels in clear, so anyone on the path can replay a tag
// it saw, within its validity, and be shown the certificate. The certificate itself is still
// encrypted on the wire (TLS 1.3), and trust still rests on the handshake's proof of the key:
// the tag only decides whether the handshake goes on.
const (
	helloTagLabel = "peerfs hello tag v1"
	// helloTagEpoch is how long a tag stays the same.
	helloTagEpoch = time.Hour
	// helloTagSkew is how many epochs the two clocks may differ by: the previous, the
	// current and the next epoch are accepted, so clocks up to an hour apart always agree
	// and a tag seen on the wire is good for at most two to three hours.
	helloTagSkew = 1
)

// errUnprovenHello aborts a handshake whose ClientHello carries no tag of a trusted device.
// It is ErrUntrusted: the device's ID cannot be known at that point, so the message cannot
// name it.
var errUnprovenHello = fmt.Errorf("the ClientHello carries no hello tag of a trusted device dialling us: the device is %w, "+
	"dialled another device at this address, or its clock is more than an hour from ours", ErrUntrusted)

// PairKey is the key that only a device knowing both device IDs can compute, for dialler
// dialling listener: SHA-256("peerfs hello tag v1" || 0x00 || dialler ID || listener ID). The
// hello tag MACs the epoch alone under it; other uses (the relay's rendezvous identifiers)
// MAC a label of their own first, so their values never equal a hello tag.
func PairKey(dialler, listener identity.DeviceID) []byte {
	key := sha256.New()
	key.Write([]byte(helloTagLabel))
	key.Write([]byte{0})
	key.Write(dialler[:])
	key.Write(listener[:])
	return key.Sum(nil)
}

// helloTag is the tag dialler sends when it dials listener during epoch.
func helloTag(dialler, listener identity.DeviceID, epoch int64) string {
	mac := hmac.New(sha256.New, PairKey(dialler, listener))
	var e [8]byte
	binary.BigEndian.PutUint64(e[:], uint64(epoch))
	mac.Write(e[:])
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

func helloEpoch(now time.Time) int64 { return now.Unix() / int64(helloTagEpoch/time.Second) }

// provenHello reports whether name is the tag of a device c trusts dialling c's device, in
// an epoch within helloTagSkew of now.
func (c *Config) provenHello(name string, now time.Time) bool {
	if len(name) != 32 || c.Trusted == nil {
		return false
	}
	self := c.Identity.ID
	epoch := helloEpoch(now)
	for _, id := range c.Trusted() {
		for d := int64(-helloTagSkew); d <= helloTagSkew; d++ {
			if hmac.Equal([]byte(name), []byte(helloTag(id, self, epoch+d))) {
				return true
			}
		}
	}
	return false
}

// admitHello decides, at the ClientHello, whether the handshake may go on; provisional
// reports that it goes on through Config.Unproven, with any device's certificate accepted.
func (c *Config) admitHello(hello *tls.ClientHelloInfo) (provisional bool, err error) {
	if c.provenHello(hello.ServerName, time.Now()) {
		return false, nil
	}
	if c.Unproven != nil && c.Unproven(hello) {
		return true, nil
	}
	return false, errUnprovenHello
}
