package pair

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWordList(t *testing.T) {
	list := wordList()
	if len(list) != 2048 {
		t.Fatalf("%d words, want 2048", len(list))
	}
	seen := map[string]bool{}
	for _, w := range list {
		if seen[w[:min(4, len(w))]] {
			t.Errorf("two words start %q", w[:min(4, len(w))])
		}
		seen[w[:min(4, len(w))]] = true
	}
}

func TestParse(t *testing.T) {
	want := Code{Nameplate: 42, Words: [3]string{"apple", "brave", "cloud"}}
	for _, in := range []string{
		"42-apple-brave-cloud",
		"42 Apple BRAVE cloud",
		"  42_apple.brave/cloud ",
		"42--apple - brave,cloud",
		"42-appl-brav-clou", // the first four letters identify a word
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", "apple-brave-cloud", "42-apple-brave", "42-apple-brave-cloud-dog", "0-apple-brave-cloud",
		"1000-apple-brave-cloud", "x-apple-brave-cloud", "42-apple-brave-clod", "42-app-brave-cloud",
	} {
		if c, err := Parse(in); !errors.Is(err, ErrBadCode) {
			t.Errorf("Parse(%q) = %v, %v; want ErrBadCode", in, c, err)
		}
	}
}

func TestGenerateRoundTrip(t *testing.T) {
	for range 50 {
		c, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		if c.Nameplate < 1 || c.Nameplate > MaxNameplate {
			t.Fatalf("nameplate %d", c.Nameplate)
		}
		back, err := Parse(c.String())
		if err != nil || back != c {
			t.Fatalf("Parse(%q) = %v, %v", c, back, err)
		}
	}
}

// TestTagNameplateOnly: the tag, which travels in clear, depends on the nameplate alone, so
// it says nothing about the words.
func TestTagNameplateOnly(t *testing.T) {
	a := Code{Nameplate: 7, Words: [3]string{"apple", "brave", "cloud"}}
	b := Code{Nameplate: 7, Words: [3]string{"zoo", "zone", "zero"}}
	c := Code{Nameplate: 8, Words: a.Words}
	if a.Tag() != b.Tag() || a.Tag() == c.Tag() {
		t.Errorf("tags: %s %s %s", a.Tag(), b.Tag(), c.Tag())
	}
	if !strings.HasPrefix(a.Tag(), "pair") || len(a.Tag()) == 32 {
		t.Errorf("tag %q must start with pair and differ in length from a hello tag", a.Tag())
	}
}

// TestRelayIDNameplateOnly: the relay rendezvous ID depends on the nameplate and the epoch
// alone (never the words), rotates with the epoch, and is pinned by a vector computed from
// its definition, so that two versions of peerfs meet at a relay.
func TestRelayIDNameplateOnly(t *testing.T) {
	a := Code{Nameplate: 7, Words: [3]string{"apple", "brave", "cloud"}}
	b := Code{Nameplate: 7, Words: [3]string{"zoo", "zone", "zero"}}
	c := Code{Nameplate: 8, Words: a.Words}
	if a.RelayID(500000) != b.RelayID(500000) || a.RelayID(500000) == c.RelayID(500000) || a.RelayID(500000) == a.RelayID(500001) {
		t.Errorf("relay IDs do not depend on the nameplate and epoch alone")
	}
	// sha256("peerfs relay pairing v1\x00" || 0x0007 || 0x000000000007a120)[:16]
	id := a.RelayID(500000)
	if got := hex.EncodeToString(id[:]); got != "bbe163c33c64c93f80c9fbf178097f6e" {
		t.Errorf("RelayID(7, 500000) = %s", got)
	}
	if RelayEpochOf(time.Unix(500000*3600+3599, 0)) != 500000 {
		t.Error("epoch of the epoch's last second")
	}
}
