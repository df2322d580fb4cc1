package pake

import (
	"bytes"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/gtank/ristretto255"
)

// The vectors below are those of draft-irtf-cfrg-cpace, appendix "Test vector for CPace
// using group ristretto255 and hash SHA-512", and of its string utility functions.

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPrependLenVectors(t *testing.T) {
	seq := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}
	cases := []struct {
		in     []byte
		head   string
		lenLen int
	}{
		{nil, "00", 1},
		{[]byte("1234"), "0431323334", 1},
		{seq(127), "7f00", 1},
		{seq(128), "800100", 2},
	}
	for _, c := range cases {
		got := prependLen(c.in)
		if !strings.HasPrefix(hex.EncodeToString(got), c.head) || len(got) != len(c.in)+c.lenLen {
			t.Errorf("prepend_len(%d bytes) = %x, want it to start %s", len(c.in), got, c.head)
		}
	}
	if got := hex.EncodeToString(lvCat([]byte("1234"), []byte("5"), nil, []byte("678"))); got != "043132333401350003363738" {
		t.Errorf("lv_cat = %s", got)
	}
	if got := hex.EncodeToString(transcriptIR([]byte("123"), []byte("PartyA"), []byte("234"), []byte("PartyB"))); got != "03313233065061727479410332333406506172747942" {
		t.Errorf("transcript_ir = %s", got)
	}
}

type vector struct {
	prs, ci, sid, genStr, genHash, g []byte
	ya, ada, bigYa, yb, adb, bigYb   []byte
	k, transcript, iskIR             []byte
}

func ristrettoVector(t *testing.T) vector {
	return vector{
		prs: []byte("Password"),
		ci:  unhex(t, "0b415f696e69746961746f720b425f726573706f6e646572"),
		sid: unhex(t, "7e4b4791d6a8ef019b936c79fb7f2c57"),
		genStr: unhex(t, `11435061636552697374726574746f3235350850617373776f726464
			00000000000000000000000000000000000000000000000000000000
			00000000000000000000000000000000000000000000000000000000
			00000000000000000000000000000000000000000000000000000000
			00000000000000000000000000000000180b415f696e69746961746f
			720b425f726573706f6e646572107e4b4791d6a8ef019b936c79fb7f
			2c57`),
		genHash: unhex(t, `da6d3ddc8802fca9058755ffd3ebde08a9c2c74945901a258482a288
			b6663af06bf645c93cd1c51512307199c80e84908916d983b34af772
			05f90851a657ee27`),
		g:     unhex(t, "222b6b195fe84b1652badb6f6a3ae3d24341e7306967f0b8115b40d5698c7e56"),
		ya:    unhex(t, "da3d23700a9e5699258aef94dc060dfda5ebb61f02a5ea77fad53f4ff0976d08"),
		ada:   []byte("ADa"),
		bigYa: unhex(t, "d6bac480f2c386c394efc7c47adb9925dcd2630b64f240c50f8d0eec482b9157"),
		yb:    unhex(t, "d2316b454718c35362d83d69df6320f38578ed5984651435e2949762d900b80d"),
		adb:   []byte("ADb"),
		bigYb: unhex(t, "3ea7e0b19560d7c0b0f5734f63b955286dfa8232b5ebe63324e2d9e7433f7258"),
		k:     unhex(t, "80b69a8a76457ab6a4d7f887a4bf6b55a2f80ac19c333f917a05fc9887c8b40f"),
		transcript: unhex(t, `20d6bac480f2c386c394efc7c47adb9925dcd2630b64f240c50f8d0e
			ec482b915703414461203ea7e0b19560d7c0b0f5734f63b955286dfa
			8232b5ebe63324e2d9e7433f725803414462`),
		iskIR: unhex(t, `b69effbf61b51d56401c0f65601abe428de8206feaaf0e32198896dc
			ae7b35cd2b38950a39dfd5d4a79164614c2984f7daa460b588c1e80c
			3fa2068af7900447`),
	}
}

func TestRistretto255Vectors(t *testing.T) {
	v := ristrettoVector(t)
	if got := generatorString([]byte(DSI), v.prs, v.ci, v.sid, hashBlockLen); !bytes.Equal(got, v.genStr) {
		t.Fatalf("generator_string = %x\nwant %x", got, v.genStr)
	}
	if h := sha512.Sum512(v.genStr); !bytes.Equal(h[:], v.genHash) {
		t.Fatalf("hash of generator string = %x", h)
	}
	if g := generator(v.prs, v.ci, v.sid).Encode(nil); !bytes.Equal(g, v.g) {
		t.Fatalf("generator = %x, want %x", g, v.g)
	}

	a, err := newWithScalar(Initiator, Inputs{Password: v.prs, CI: v.ci, SID: v.sid, AD: v.ada}, [32]byte(v.ya))
	if err != nil {
		t.Fatal(err)
	}
	b, err := newWithScalar(Responder, Inputs{Password: v.prs, CI: v.ci, SID: v.sid, AD: v.adb}, [32]byte(v.yb))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Share(), v.bigYa) {
		t.Errorf("Ya = %x, want %x", a.Share(), v.bigYa)
	}
	if !bytes.Equal(b.Share(), v.bigYb) {
		t.Errorf("Yb = %x, want %x", b.Share(), v.bigYb)
	}
	if k, ok := scalarMultVfy(a.y, v.bigYb); !ok || !bytes.Equal(k, v.k) {
		t.Errorf("scalar_mult_vfy(ya, Yb) = %x, want %x", k, v.k)
	}
	if k, ok := scalarMultVfy(b.y, v.bigYa); !ok || !bytes.Equal(k, v.k) {
		t.Errorf("scalar_mult_vfy(yb, Ya) = %x, want %x", k, v.k)
	}
	if got := transcriptIR(v.bigYa, v.ada, v.bigYb, v.adb); !bytes.Equal(got, v.transcript) {
		t.Errorf("transcript_ir = %x", got)
	}
	if err := a.Finish(b.Share(), v.adb); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(a.Share(), v.ada); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.ISK(), v.iskIR) || !bytes.Equal(b.ISK(), v.iskIR) {
		t.Errorf("ISK: A %x, B %x, want %x", a.ISK(), b.ISK(), v.iskIR)
	}
	if err := a.Verify(b.Confirmation()); err != nil {
		t.Error(err)
	}
	if err := b.Verify(a.Confirmation()); err != nil {
		t.Error(err)
	}
}

// TestScalarMultVectors: the draft's valid case, and the two invalid inputs for which
// scalar_mult_vfy returns G.I so that the protocol aborts.
func TestScalarMultVectors(t *testing.T) {
	s := ristretto255.NewScalar()
	if err := s.Decode(unhex(t, "7cd0e075fa7955ba52c02759a6c90dbbfc10e6d40aea8d283e407d88cf538a05")); err != nil {
		t.Fatal(err)
	}
	want := unhex(t, "7c13645fe790a468f62c39beb7388e541d8405d1ade69d1778c5fe3e7f6b600e")
	if got, ok := scalarMultVfy(s, unhex(t, "2c3c6b8c4f3800e7aef6864025b4ed79bd599117e427c41bd47d93d654b4a51c")); !ok || !bytes.Equal(got, want) {
		t.Errorf("scalar_mult_vfy(s, X) = %x, want %x", got, want)
	}
	for _, bad := range []string{
		"2b3c6b8c4f3800e7aef6864025b4ed79bd599117e427c41bd47d93d654b4a51c", // does not decode
		"0000000000000000000000000000000000000000000000000000000000000000", // the identity
	} {
		if _, ok := scalarMultVfy(s, unhex(t, bad)); ok {
			t.Errorf("scalar_mult_vfy accepted %s", bad)
		}
		p, _ := New(Initiator, Inputs{Password: []byte("pw")}, nil)
		if err := p.Finish(unhex(t, bad), nil); !errors.Is(err, ErrBadShare) {
			t.Errorf("Finish(%s) = %v, want ErrBadShare", bad, err)
		}
	}
}

// run plays one exchange between two parties with the given inputs and reports whether
// confirmation succeeded in each direction.
func run(t *testing.T, a, b Inputs) (okA, okB bool) {
	t.Helper()
	pa, err := New(Initiator, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := New(Responder, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pa.Finish(pb.Share(), b.AD); err != nil {
		t.Fatal(err)
	}
	if err := pb.Finish(pa.Share(), a.AD); err != nil {
		t.Fatal(err)
	}
	return pa.Verify(pb.Confirmation()) == nil, pb.Verify(pa.Confirmation()) == nil
}

func TestConfirmation(t *testing.T) {
	base := Inputs{Password: []byte("7 apple brave cloud"), CI: []byte("ci"), SID: []byte("exporter"), AD: []byte("a")}
	other := func(f func(*Inputs)) Inputs { in := base; in.AD = []byte("b"); f(&in); return in }
	cases := []struct {
		name string
		b    Inputs
		ok   bool
	}{
		{"same inputs", other(func(*Inputs) {}), true},
		{"wrong password", other(func(in *Inputs) { in.Password = []byte("7 apple brave clown") }), false},
		{"other channel", other(func(in *Inputs) { in.CI = []byte("ci2") }), false},
		{"other session", other(func(in *Inputs) { in.SID = []byte("exporter2") }), false},
	}
	for _, c := range cases {
		okA, okB := run(t, base, c.b)
		if okA != c.ok || okB != c.ok {
			t.Errorf("%s: confirmation A %v B %v, want %v", c.name, okA, okB, c.ok)
		}
	}
}

func TestKeyAgrees(t *testing.T) {
	in := Inputs{Password: []byte("pw"), SID: []byte("sid")}
	a, _ := New(Initiator, in, nil)
	b, _ := New(Responder, in, nil)
	if a.Finish(b.Share(), nil) != nil || b.Finish(a.Share(), nil) != nil {
		t.Fatal("finish failed")
	}
	ka, _ := a.Key("secret", 32)
	kb, _ := b.Key("secret", 32)
	kc, _ := a.Key("other", 32)
	if !bytes.Equal(ka, kb) || bytes.Equal(ka, kc) || len(ka) != 32 {
		t.Errorf("keys: %x %x %x", ka, kb, kc)
	}
}
