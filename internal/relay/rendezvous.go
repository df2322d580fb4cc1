package relay

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/transport"
)

// A rendezvous identifier names a meeting at a relay without naming the devices:
//
//	id = first 16 bytes of HMAC-SHA-256(transport.PairKey(dialler, listener),
//	                                    "peerfs relay rendezvous v1" || epoch as 8 bytes big-endian)
//	epoch = Unix time / 3600
//
// Only a device that knows both device IDs can compute it, and it changes every hour, so the
// relay cannot tell that two meetings hours apart are of the same pair, nor link one to the
// hello tag the inner handshake carries (another MAC under the same key). Device IDs are not
// secret: an operator who guesses both IDs can confirm a meeting (docs/ARCHITECTURE.md).
const (
	rendezvousLabel = "peerfs relay rendezvous v1"
	// Epoch is how long a rendezvous ID stays the same.
	Epoch = time.Hour
	// epochSkew: a listening device waits on the previous, current and next epochs' IDs, so
	// a dialler whose clock is up to an hour off still meets it.
	epochSkew = 1
)

// ID is a rendezvous identifier.
type ID [IDLen]byte

func (id ID) String() string { return hex.EncodeToString(id[:]) }

// EpochOf is the rendezvous epoch of t.
func EpochOf(t time.Time) int64 { return t.Unix() / int64(Epoch/time.Second) }

// RendezvousID is the identifier for dialler meeting listener in epoch.
func RendezvousID(dialler, listener identity.DeviceID, epoch int64) ID {
	mac := hmac.New(sha256.New, transport.PairKey(dialler, listener))
	mac.Write([]byte(rendezvousLabel))
	var e [8]byte
	binary.BigEndian.PutUint64(e[:], uint64(epoch))
	mac.Write(e[:])
	var id ID
	copy(id[:], mac.Sum(nil))
	return id
}

// DialID is what self names to meet the listening device peer now.
func DialID(self, peer identity.DeviceID, now time.Time) ID {
	return RendezvousID(self, peer, EpochOf(now))
}

// ListenIDs are what self waits on for each of peers dialling it: the previous, current and
// next epochs' IDs. A listening join is to be renewed at least once an epoch.
func ListenIDs(self identity.DeviceID, peers []identity.DeviceID, now time.Time) []ID {
	e := EpochOf(now)
	ids := make([]ID, 0, len(peers)*(2*epochSkew+1))
	for _, p := range peers {
		for d := int64(-epochSkew); d <= epochSkew; d++ {
			ids = append(ids, RendezvousID(p, self, e+d))
		}
	}
	return ids
}
