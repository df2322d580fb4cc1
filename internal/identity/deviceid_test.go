package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// knownSeed gives a fixed key whose device ID is pinned below, so that
// the human format can never drift without a test failing.
func knownSeed() []byte {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	return seed
}

const knownID = "KZDVVJ2-UMNDUYL-AUF35O3-6K6KW4U-62MUJVR-A46TN3R-UQGZOVM-IHOCGAL"

func randomID(t *testing.T) DeviceID {
	t.Helper()
	var id DeviceID
	if _, err := rand.Read(id[:]); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestKnownVector(t *testing.T) {
	pub := ed25519.NewKeyFromSeed(knownSeed()).Public().(ed25519.PublicKey)
	id := NewDeviceID(pub)
	if got := id.String(); got != knownID {
		t.Fatalf("String() = %s, want %s", got, knownID)
	}
	if got := id.Short(); got != "KZDVVJ2" {
		t.Fatalf("Short() = %s, want KZDVVJ2", got)
	}
	parsed, err := ParseDeviceID(knownID)
	if err != nil {
		t.Fatal(err)
	}
	if parsed != id {
		t.Fatalf("ParseDeviceID(%s) = %x, want %x", knownID, parsed, id)
	}
}

func TestLuhn(t *testing.T) {
	tests := []struct {
		alphabet, in string
		want         byte
	}{
		// The textbook decimal Luhn example, to show the algorithm is the
		// standard one and not merely self-consistent.
		{"0123456789", "7992739871", '3'},
		{alphabet, "ABCDEFGHIJKLM", 'I'},
		{alphabet, "AAAAAAAAAAAAA", 'A'},
	}
	for _, tt := range tests {
		if got := luhn(tt.alphabet, tt.in); got != tt.want {
			t.Errorf("luhn(%q) = %c, want %c", tt.in, got, tt.want)
		}
	}
}

func TestFormatShape(t *testing.T) {
	for range 100 {
		s := randomID(t).String()
		if len(s) != 63 {
			t.Fatalf("len(%q) = %d, want 63", s, len(s))
		}
		parts := strings.Split(s, "-")
		if len(parts) != 8 {
			t.Fatalf("%q has %d blocks, want 8", s, len(parts))
		}
		for _, p := range parts {
			if len(p) != 7 {
				t.Fatalf("%q: block %q is not 7 characters", s, p)
			}
			if strings.Trim(p, alphabet) != "" {
				t.Fatalf("%q: block %q has characters outside the alphabet", s, p)
			}
		}
	}
}

func TestRoundTrip(t *testing.T) {
	ids := []DeviceID{{}, {0xff, 0xff, 0xff}, randomID(t)}
	for range 1000 {
		ids = append(ids, randomID(t))
	}
	var all DeviceID
	for i := range all {
		all[i] = 0xff
	}
	ids = append(ids, all)

	for _, id := range ids {
		got, err := ParseDeviceID(id.String())
		if err != nil {
			t.Fatalf("ParseDeviceID(%s): %v", id, err)
		}
		if got != id {
			t.Fatalf("round trip of %x gave %x", id, got)
		}
	}
}

func TestParseLenient(t *testing.T) {
	tests := []struct {
		name, in string
	}{
		{"canonical", knownID},
		{"lower case", strings.ToLower(knownID)},
		{"no dashes", strings.ReplaceAll(knownID, "-", "")},
		{"spaces", strings.ReplaceAll(knownID, "-", " ")},
		{"surrounding space", "  " + knownID + "\n"},
		{"dashes anywhere", "-KZ-DVVJ2UMNDUYL-AUF-35O3-6K6KW4U-62MUJVR-A46TN3R-UQGZOVM-IHOCGAL-"},
		{"zero for O", strings.ReplaceAll(knownID, "O", "0")},
		{"one for I", strings.ReplaceAll(knownID, "I", "1")},
		{"mixed", "kzdvvj2 umnduyl auf3503 6k6kw4u 62mujvr a46tn3r uqgz0vm 1h0cgal"},
	}
	want, err := ParseDeviceID(knownID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDeviceID(tt.in)
			if err != nil {
				t.Fatalf("ParseDeviceID(%q): %v", tt.in, err)
			}
			if got != want {
				t.Fatalf("ParseDeviceID(%q) = %s, want %s", tt.in, got, want)
			}
		})
	}

	// No B in the pinned ID, so check the 8 typo on one that has one.
	for range 100 {
		id := randomID(t)
		s := id.String()
		if !strings.Contains(s, "B") {
			continue
		}
		got, err := ParseDeviceID(strings.ReplaceAll(s, "B", "8"))
		if err != nil || got != id {
			t.Fatalf("ParseDeviceID with 8 for B: got %s, %v; want %s", got, err, id)
		}
		return
	}
	t.Fatal("no random ID contained a B")
}

// replaceAt returns s with the byte at i replaced by c.
func replaceAt(s string, i int, c byte) string {
	b := []byte(s)
	b[i] = c
	return string(b)
}

// otherChar returns an alphabet character different from c.
func otherChar(c byte) byte {
	if c == 'A' {
		return 'C'
	}
	return 'A'
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		mention string // expected in the error text
	}{
		{"empty", "", "0 characters"},
		{"too short", knownID[:62], "55 characters"},
		{"too long", knownID + "A", "57 characters"},
		{"bad char 9", replaceAt(knownID, 3, '9'), `'9'`},
		{"bad char punct", replaceAt(knownID, 3, '!'), `'!'`},
		{"non-ASCII", "Ä" + knownID[1:], `'Ä'`},
		{"no check characters", NewDeviceID(ed25519.NewKeyFromSeed(knownSeed()).Public().(ed25519.PublicKey)).dataString(), "no check characters"},
	}
	// A wrong check character in each of the 4 groups; the check
	// character is the last of every second printed block.
	for g := range 4 {
		i := (2*g+1)*8 + 6 // index of the last char of printed block 2g+2
		tests = append(tests, struct {
			name    string
			in      string
			mention string
		}{
			name:    "check char group " + string(rune('1'+g)),
			in:      replaceAt(knownID, i, otherChar(knownID[i])),
			mention: "block " + string(rune('1'+2*g)) + " or " + string(rune('2'+2*g)),
		})
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDeviceID(tt.in)
			if err == nil {
				t.Fatalf("ParseDeviceID(%q) succeeded, want error", tt.in)
			}
			if !errors.Is(err, ErrBadDeviceID) {
				t.Errorf("error %v does not wrap ErrBadDeviceID", err)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not mention %q", err, tt.mention)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q spans several lines", err)
			}
		})
	}
}

// dataString is the 52-character base32 form without check characters.
func (id DeviceID) dataString() string { return b32.EncodeToString(id[:]) }

func TestParseCatchesSingleSubstitution(t *testing.T) {
	s := strings.ReplaceAll(knownID, "-", "")
	for i := range len(s) {
		for j := range len(alphabet) {
			c := alphabet[j]
			if c == s[i] {
				continue
			}
			typo := replaceAt(s, i, c)
			if _, err := ParseDeviceID(typo); !errors.Is(err, ErrBadDeviceID) {
				t.Fatalf("substituting %c at %d: err = %v, want ErrBadDeviceID", c, i, err)
			}
		}
	}
}

func TestParseRejectsNonCanonical(t *testing.T) {
	// The last data character holds one bit of the ID and four padding
	// bits. Set a padding bit and give the group a matching check
	// character, so that only the canonical-encoding check can catch it.
	data := []byte(randomID(t).dataString())
	last := strings.IndexByte(alphabet, data[51])
	data[51] = alphabet[last|1]
	var checked []byte
	for g := range 4 {
		part := string(data[g*13 : (g+1)*13])
		checked = append(checked, part...)
		checked = append(checked, luhn(alphabet, part))
	}
	_, err := ParseDeviceID(string(checked))
	if !errors.Is(err, ErrBadDeviceID) || !strings.Contains(err.Error(), "canonical") {
		t.Fatalf("ParseDeviceID(non-canonical) err = %v, want canonical encoding error", err)
	}
}

func TestTextMarshal(t *testing.T) {
	id := randomID(t)
	b, err := json.Marshal(map[string]DeviceID{"id": id})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"` + id.String() + `"}`
	if string(b) != want {
		t.Fatalf("json = %s, want %s", b, want)
	}
	var back map[string]DeviceID
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back["id"] != id {
		t.Fatalf("unmarshal gave %s, want %s", back["id"], id)
	}

	var bad DeviceID
	if err := bad.UnmarshalText([]byte(id.dataString())); !errors.Is(err, ErrBadDeviceID) {
		t.Fatalf("UnmarshalText(no check chars) err = %v, want ErrBadDeviceID", err)
	}
}
