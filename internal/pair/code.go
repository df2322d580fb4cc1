package pair

import (
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Code limits.
const (
	// Words is how many words a code holds: 3 words of 11 bits each, 33 bits of password,
	// one online guess per code (docs/ARCHITECTURE.md, pairing threat model).
	Words = 3
	// MaxNameplate bounds the nameplate: a number of at most three digits picks the pairing
	// among the few a network holds at once; it is public and adds nothing to the password.
	MaxNameplate = 999
)

// ErrBadCode means a typed code does not have the form NUMBER-WORD-WORD-WORD.
var ErrBadCode = errors.New("not a pairing code")

// wordsTxt is the English word list of BIP-39 (github.com/bitcoin/bips, bip-0039/english.txt,
// SHA-256 2f5eed53a4727b4bf8880d8f3f199efc90e58503646d9ff8eff3a2ed3b24dbda), as shipped with
// its reference implementation trezor/python-mnemonic under the MIT licence (see NOTICE).
// Its 2048 words were chosen to be told apart when read aloud and by their first four
// letters, and no word is another's prefix beyond those four.
//
//go:embed words.txt
var wordsTxt string

var wordList = sync.OnceValue(func() []string { return strings.Fields(wordsTxt) })

// Code is a pairing code: a nameplate that picks the rendezvous (public) and three words
// (the password).
type Code struct {
	Nameplate int
	Words     [Words]string
}

// Generate draws a new code from crypto/rand.
func Generate() (Code, error) {
	var c Code
	n, err := rand.Int(rand.Reader, big.NewInt(MaxNameplate))
	if err != nil {
		return c, err
	}
	c.Nameplate = int(n.Int64()) + 1
	list := wordList()
	for i := range c.Words {
		w, err := rand.Int(rand.Reader, big.NewInt(int64(len(list))))
		if err != nil {
			return c, err
		}
		c.Words[i] = list[w.Int64()]
	}
	return c, nil
}

// String is the code as shown: "42-apple-brave-cloud".
func (c Code) String() string {
	return strconv.Itoa(c.Nameplate) + "-" + strings.Join(c.Words[:], "-")
}

// Parse reads a code as typed: any case, words separated by '-', spaces, '.', '_', ',' or
// '/', a word also by its first four letters (unique in the list).
func Parse(s string) (Code, error) {
	var c Code
	fields := strings.FieldsFunc(strings.ToLower(strings.TrimSpace(s)), func(r rune) bool {
		return strings.ContainsRune("- ._,/\t", r)
	})
	if len(fields) != 1+Words {
		return c, fmt.Errorf("%w: %q should be a number and %d words, like 42-apple-brave-cloud", ErrBadCode, s, Words)
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil || n < 1 || n > MaxNameplate {
		return c, fmt.Errorf("%w: %q should start with a number from 1 to %d", ErrBadCode, s, MaxNameplate)
	}
	c.Nameplate = n
	for i, f := range fields[1:] {
		w, ok := lookupWord(f)
		if !ok {
			return c, fmt.Errorf("%w: %q is not a word of pairing codes: check the spelling", ErrBadCode, f)
		}
		c.Words[i] = w
	}
	return c, nil
}

// lookupWord finds f in the list, whole or by a prefix of at least four letters that only
// one word has.
func lookupWord(f string) (string, bool) {
	var match string
	for _, w := range wordList() {
		if w == f {
			return w, true
		}
		if len(f) >= 4 && strings.HasPrefix(w, f) {
			if match != "" {
				return "", false
			}
			match = w
		}
	}
	return match, match != ""
}

// password is the CPace password (PRS): the canonical code, nameplate included.
func (c Code) password() []byte { return []byte("peerfs pair code v1\x00" + c.String()) }

// Tag is the pairing tag: what the dialling device puts in its ClientHello's server name,
// and what LAN discovery announces and asks for. It is derived from the nameplate alone, so
// that an observer who sees it can test no guess of the words offline:
//
//	tag = "pair" + hex(first 12 bytes of SHA-256("peerfs pair tag v1" || 0x00 || nameplate as 2 bytes big-endian))
//
// It has another length than a hello tag (32 characters), so the two never collide, and
// holds only lower-case letters and digits, as discovery tags must.
func (c Code) Tag() string {
	h := sha256.New()
	h.Write([]byte("peerfs pair tag v1\x00"))
	var n [2]byte
	binary.BigEndian.PutUint16(n[:], uint16(c.Nameplate))
	h.Write(n[:])
	return "pair" + hex.EncodeToString(h.Sum(nil)[:12])
}

// RelayIDLen is the length of a pairing rendezvous ID, that of a relay's rendezvous IDs.
const RelayIDLen = 16

// RelayEpoch is how long a pairing rendezvous ID stays the same: the epoch of the peers'
// rendezvous IDs at a relay (relay.Epoch), so that the two rotate together.
const RelayEpoch = time.Hour

// RelayID is the rendezvous ID under which the device showing the code waits at its relays
// and the device typing it meets it there, in epoch (Unix time / RelayEpoch):
//
//	id = first 16 bytes of SHA-256("peerfs relay pairing v1" || 0x00 || nameplate as 2 bytes big-endian
//	                                || epoch as 8 bytes big-endian)
//
// Like Tag it is derived from the nameplate alone: the relay learns that some pairing met
// under it, and when, but can test no guess of the words offline, and sees no device ID. Its
// label differs from the peers' rendezvous IDs (HMACs under a key of both device IDs), so
// the two cannot be confused; and it rotates with the epoch like them.
func (c Code) RelayID(epoch int64) [RelayIDLen]byte {
	h := sha256.New()
	h.Write([]byte("peerfs relay pairing v1\x00"))
	var b [10]byte
	binary.BigEndian.PutUint16(b[:2], uint16(c.Nameplate))
	binary.BigEndian.PutUint64(b[2:], uint64(epoch))
	h.Write(b[:])
	var id [RelayIDLen]byte
	copy(id[:], h.Sum(nil))
	return id
}

// RelayEpochOf is the pairing rendezvous epoch of t.
func RelayEpochOf(t time.Time) int64 { return t.Unix() / int64(RelayEpoch/time.Second) }
