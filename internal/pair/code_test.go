package pair

import (
	"errors"
	"strings"
	"testing"
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
