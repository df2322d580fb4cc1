package pair

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/transport"
)

func newIdentity(t *testing.T) *identity.Identity {
	t.Helper()
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

type outcome struct {
	res *Result
	err error
}

// listen accepts one provisional link for code on loopback and pairs over it with o.
func listen(t *testing.T, id *identity.Identity, o Options) (string, <-chan outcome) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	cfg := &transport.Config{Identity: id, Unproven: func(h *tls.ClientHelloInfo) bool { return h.ServerName == o.Code.Tag() }}
	out := make(chan outcome, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			out <- outcome{nil, err}
			return
		}
		conn, err := transport.Server(context.Background(), raw, cfg)
		if err != nil {
			out <- outcome{nil, err}
			return
		}
		defer conn.Close()
		res, err := Run(context.Background(), conn, o)
		out <- outcome{res, err}
	}()
	return ln.Addr().String(), out
}

func dial(t *testing.T, addr string, id *identity.Identity, o Options) (*Result, error) {
	t.Helper()
	conn, err := transport.DialProvisional(context.Background(), addr, &transport.Config{Identity: id}, o.Code.Tag())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return Run(context.Background(), conn, o)
}

var testCode = Code{Nameplate: 42, Words: [3]string{"apple", "brave", "cloud"}}

func TestPair(t *testing.T) {
	l, d := newIdentity(t), newIdentity(t)
	addr, out := listen(t, l, Options{Role: Listener, Code: testCode, Hello: Hello{Name: "desk", Port: 7462}})
	dres, err := dial(t, addr, d, Options{Role: Dialler, Code: testCode, Hello: Hello{Name: "laptop"}})
	if err != nil {
		t.Fatal(err)
	}
	lo := <-out
	if lo.err != nil {
		t.Fatal(lo.err)
	}
	if dres.Peer != l.ID || lo.res.Peer != d.ID {
		t.Errorf("peers: dialler saw %s (want %s), listener saw %s (want %s)", dres.Peer, l.ID, lo.res.Peer, d.ID)
	}
	if dres.Hello != (Hello{Name: "desk", Port: 7462}) || lo.res.Hello != (Hello{Name: "laptop"}) {
		t.Errorf("hellos: %+v %+v", dres.Hello, lo.res.Hello)
	}
	if len(dres.Secret) != SecretLen || !bytes.Equal(dres.Secret, lo.res.Secret) {
		t.Errorf("secrets differ: %x %x", dres.Secret, lo.res.Secret)
	}
}

func TestPairWrongCode(t *testing.T) {
	l, d := newIdentity(t), newIdentity(t)
	addr, out := listen(t, l, Options{Role: Listener, Code: testCode})
	wrong := testCode
	wrong.Words[2] = "clown"
	if _, err := dial(t, addr, d, Options{Role: Dialler, Code: wrong}); !errors.Is(err, ErrWrongCode) {
		t.Errorf("dialler: %v, want ErrWrongCode", err)
	}
	if lo := <-out; !errors.Is(lo.err, ErrWrongCode) {
		t.Errorf("listener: %v, want ErrWrongCode", lo.err)
	}
}

func TestPairAlreadyTrusted(t *testing.T) {
	l, d := newIdentity(t), newIdentity(t)
	addr, out := listen(t, l, Options{Role: Listener, Code: testCode, Trusted: func(id identity.DeviceID) bool { return id == d.ID }})
	if _, err := dial(t, addr, d, Options{Role: Dialler, Code: testCode}); !errors.Is(err, ErrAlreadyTrusted) {
		t.Errorf("dialler: %v, want ErrAlreadyTrusted", err)
	}
	if lo := <-out; !errors.Is(lo.err, ErrAlreadyTrusted) {
		t.Errorf("listener: %v, want ErrAlreadyTrusted", lo.err)
	}
}

// TestPairMITM: a device in the middle accepts the dialler's link with its own certificate,
// opens its own link to the listener and relays the pairing messages both ways unchanged.
// The two links have different exporters and different device IDs, so the CPace runs do not
// agree and confirmation fails on both sides, although both used the right code.
func TestPairMITM(t *testing.T) {
	l, d, m := newIdentity(t), newIdentity(t), newIdentity(t)
	addr, out := listen(t, l, Options{Role: Listener, Code: testCode})

	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mln.Close()
	go func() {
		raw, err := mln.Accept()
		if err != nil {
			return
		}
		// The middle answers any tag: it knows the nameplate (it is public).
		front, err := transport.Server(context.Background(), raw, &transport.Config{Identity: m, Unproven: func(*tls.ClientHelloInfo) bool { return true }})
		if err != nil {
			return
		}
		defer front.Close()
		back, err := transport.DialProvisional(context.Background(), addr, &transport.Config{Identity: m}, testCode.Tag())
		if err != nil {
			return
		}
		defer back.Close()
		go io.Copy(back, front)
		io.Copy(front, back)
	}()

	if _, err := dial(t, mln.Addr().String(), d, Options{Role: Dialler, Code: testCode}); !errors.Is(err, ErrWrongCode) {
		t.Errorf("dialler through the middle: %v, want ErrWrongCode", err)
	}
	if lo := <-out; !errors.Is(lo.err, ErrWrongCode) {
		t.Errorf("listener through the middle: %v, want ErrWrongCode", lo.err)
	}
}
