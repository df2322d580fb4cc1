package discover

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
)

// vectorID is a fixed device ID, for test vectors.
func vectorID(b byte) identity.DeviceID {
	return identity.DeviceID(sha256.Sum256([]byte{b}))
}

// runSalt makes this process's test IDs its own: the services of two test processes on one
// machine hear each other on the loopback interface, and must not recognise each other.
var runSalt = rand.Text()

// testTag is a rendezvous tag of this test process.
func testTag(name string) string {
	sum := sha256.Sum256([]byte(runSalt + name))
	return hex.EncodeToString(sum[:8])
}

// testID is a device ID of this test process.
func testID(b byte) identity.DeviceID {
	return identity.DeviceID(sha256.Sum256(append([]byte(runSalt), b)))
}

func TestTagDirectionsDiffer(t *testing.T) {
	a, b := testID(1), testID(2)
	for _, secret := range [][]byte{nil, []byte("a secret agreed at pairing")} {
		ab := Tag(PeerKey(a, b, secret), 7)
		ba := Tag(PeerKey(b, a, secret), 7)
		if ab == ba {
			t.Errorf("secret %q: a's tag for b equals b's tag for a (%s): an observer would see one tag from two hosts", secret, ab)
		}
	}
}

func TestTagSecretChangesTag(t *testing.T) {
	a, b := testID(1), testID(2)
	byID := Tag(PeerKey(a, b, nil), 7)
	bySecret := Tag(PeerKey(a, b, []byte("s1")), 7)
	other := Tag(PeerKey(a, b, []byte("s2")), 7)
	if byID == bySecret || bySecret == other {
		t.Fatalf("tags do not depend on the secret: %s %s %s", byID, bySecret, other)
	}
}

func TestTagRotatesWithEpoch(t *testing.T) {
	key := PeerKey(testID(1), testID(2), nil)
	seen := map[string]int64{}
	for e := int64(0); e < 100; e++ {
		tag := Tag(key, e)
		if len(tag) != TagLen {
			t.Fatalf("tag %q has %d characters, want %d", tag, len(tag), TagLen)
		}
		if err := CheckTag(tag); err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[tag]; ok {
			t.Fatalf("epochs %d and %d share tag %s", prev, e, tag)
		}
		seen[tag] = e
	}
}

// TestTagVector pins the derivation (docs/PROTOCOL.md): a change breaks discovery between
// versions. The values were computed apart from this code, with Python's hmac and hashlib.
func TestTagVector(t *testing.T) {
	a, b := vectorID(1), vectorID(2)
	cases := []struct {
		secret []byte
		epoch  int64
		want   string
	}{
		{nil, 0, "0038e83ab37f63ea"},
		{nil, 493000, "e279c618efacb1b8"},
		{[]byte("secret"), 493000, "d7dbd556b4950096"},
	}
	for _, c := range cases {
		if got := Tag(PeerKey(a, b, c.secret), c.epoch); got != c.want {
			t.Errorf("Tag(PeerKey(a, b, %q), %d) = %s, want %s", c.secret, c.epoch, got, c.want)
		}
	}
}

func TestEpochAt(t *testing.T) {
	t0 := time.Unix(7200, 0)
	if got := EpochAt(t0, 0); got != 2 {
		t.Errorf("EpochAt(7200 s, default) = %d, want 2", got)
	}
	if got := EpochAt(t0.Add(time.Hour-time.Nanosecond), 0); got != 2 {
		t.Errorf("EpochAt just before the next hour = %d, want 2", got)
	}
	if got := EpochAt(t0, time.Second); got != 7200 {
		t.Errorf("EpochAt(7200 s, 1 s) = %d, want 7200", got)
	}
}

func TestCheckTag(t *testing.T) {
	for _, c := range []struct {
		tag string
		ok  bool
	}{
		{"0123456789abcdef", true},
		{"abcdefgh", true},
		{"abcdefg", false},
		{"ABCDEFGH", false},
		{"abcd=efgh", false},
		{"abcd efgh", false},
		{string(make([]byte, 64)), false},
	} {
		if err := CheckTag(c.tag); (err == nil) != c.ok {
			t.Errorf("CheckTag(%q) = %v, want ok %v", c.tag, err, c.ok)
		}
	}
}
