package punch

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"slices"
	"testing"
)

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range []Message{
		{Type: MsgStart, Attempt: 0xdeadbeef},
		{Type: MsgCandidates, Attempt: 1, Candidates: []Candidate{}},
		{Type: MsgCandidates, Attempt: 2, Candidates: []Candidate{
			{CandidateObserved, netip.MustParseAddrPort("203.0.113.7:40211")},
			{CandidateLocal, netip.MustParseAddrPort("[2001:db8::1]:40211")},
		}},
	} {
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		var got Message
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		if got.Type != m.Type || got.Attempt != m.Attempt || !slices.Equal(got.Candidates, m.Candidates) {
			t.Errorf("round trip: %+v, want %+v", got, m)
		}
		var buf bytes.Buffer
		if err := WriteMessage(&buf, &m); err != nil {
			t.Fatal(err)
		}
		if r, err := ReadMessage(&buf); err != nil || r.Attempt != m.Attempt {
			t.Errorf("over a stream: %+v, %v", r, err)
		}
	}
}

// TestMessageBytes pins the encoding docs/PROTOCOL.md gives as its example.
func TestMessageBytes(t *testing.T) {
	m := Message{Type: MsgCandidates, Attempt: 7, Candidates: []Candidate{
		{CandidateObserved, netip.MustParseAddrPort("203.0.113.7:40211")},
	}}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hex.EncodeToString(b), "010100000007"+"01"+"0104cb0071079d13"; got != want {
		t.Errorf("CANDIDATES encodes as %s, want %s", got, want)
	}
}

func TestMessageRefused(t *testing.T) {
	v4 := func(s string) Candidate { return Candidate{CandidateObserved, netip.MustParseAddrPort(s)} }
	for name, m := range map[string]Message{
		"unknown type":        {Type: 9},
		"start with cands":    {Type: MsgStart, Candidates: []Candidate{v4("192.0.2.1:1")}},
		"port 0":              {Type: MsgCandidates, Candidates: []Candidate{v4("192.0.2.1:0")}},
		"unspecified":         {Type: MsgCandidates, Candidates: []Candidate{v4("0.0.0.0:1")}},
		"zone":                {Type: MsgCandidates, Candidates: []Candidate{{CandidateLocal, netip.MustParseAddrPort("[fe80::1%eth0]:1")}}},
		"kind 0":              {Type: MsgCandidates, Candidates: []Candidate{{0, netip.MustParseAddrPort("192.0.2.1:1")}}},
		"too many candidates": {Type: MsgCandidates, Candidates: slices.Repeat([]Candidate{v4("192.0.2.1:1")}, MaxCandidates+1)},
	} {
		if _, err := m.MarshalBinary(); !errors.Is(err, ErrBadMsg) {
			t.Errorf("%s: encoding gave %v, want ErrBadMsg", name, err)
		}
	}
	for name, tc := range map[string]struct {
		hex  string
		want error
	}{
		"short":           {"0102", ErrBadMsg},
		"version 2":       {"020200000000", ErrMsgVersion},
		"trailing":        {"02" + "00000000" + "00", ErrMsgVersion},
		"start trailing":  {"010200000000ff", ErrBadMsg},
		"no count":        {"010100000000", ErrBadMsg},
		"count too large": {"01010000000011", ErrBadMsg},
		"family 5":        {"01010000000001" + "0105cb00710779d13", ErrBadMsg},
		"truncated":       {"01010000000001" + "0104cb0071", ErrBadMsg},
		"missing cand":    {"01010000000002" + "0104cb00710779d13", ErrBadMsg},
	} {
		b, _ := hex.DecodeString(tc.hex)
		var m Message
		if err := m.UnmarshalBinary(b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if _, err := ReadMessage(bytes.NewReader([]byte{0xff, 0xff})); !errors.Is(err, ErrBadMsg) {
		t.Errorf("a length past MaxMsgLen: %v, want ErrBadMsg", err)
	}
}

// FuzzMessage: decoding never panics, and what decodes re-encodes to the same bytes.
func FuzzMessage(f *testing.F) {
	for _, m := range []Message{
		{Type: MsgStart, Attempt: 3},
		{Type: MsgCandidates, Attempt: 1, Candidates: []Candidate{
			{CandidateObserved, netip.MustParseAddrPort("203.0.113.7:40211")},
			{CandidateLocal, netip.MustParseAddrPort("[2001:db8::1]:1")},
		}},
	} {
		b, _ := m.MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Message
		if err := m.UnmarshalBinary(b); err != nil {
			return
		}
		out, err := m.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", m, err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoded %x, decoded from %x", out, b)
		}
	})
}
