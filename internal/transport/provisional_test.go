package transport

import (
	"context"
	"crypto/tls"
	"testing"
)

// TestProvisionalLink: a hello the Unproven hook admits brings a link with an untrusted
// device, marked Provisional on both sides with each other's device ID; without the hook's
// consent the same dial gets no link.
func TestProvisionalLink(t *testing.T) {
	srv, cli := newIdentity(t), newIdentity(t)
	pairing := func(h *tls.ClientHelloInfo) bool { return h.ServerName == "pair-tag" }
	addr, res := serve(t, &Config{Identity: srv, Trusted: trust(), Unproven: pairing})
	conn, err := DialProvisional(context.Background(), addr, &Config{Identity: cli}, "pair-tag")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := wait(t, res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !conn.Provisional || !r.conn.Provisional || conn.Peer != srv.ID || r.conn.Peer != cli.ID {
		t.Fatalf("client: provisional %v peer %s; server: provisional %v peer %s", conn.Provisional, conn.Peer, r.conn.Provisional, r.conn.Peer)
	}

	addr, res = serve(t, &Config{Identity: srv, Trusted: trust(), Unproven: pairing})
	if conn, err := DialProvisional(context.Background(), addr, &Config{Identity: cli}, "other-tag"); err == nil {
		conn.Close()
		t.Fatal("a hello the hook refused got a link")
	}
	if r := wait(t, res); r.err == nil {
		t.Fatal("the server accepted a hello the hook refused")
	}
}

// TestTrustedLinkNotProvisional: an ordinary link between trusted devices is not marked.
func TestTrustedLinkNotProvisional(t *testing.T) {
	srv, cli := newIdentity(t), newIdentity(t)
	addr, res := serve(t, &Config{Identity: srv, Trusted: trust(cli), Unproven: func(*tls.ClientHelloInfo) bool { return true }})
	conn, err := Dial(context.Background(), addr, &Config{Identity: cli, Trusted: trust(srv)}, srv.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if r := wait(t, res); r.err != nil || r.conn.Provisional || conn.Provisional {
		t.Fatalf("server %+v, client provisional %v", r, conn.Provisional)
	}
}
