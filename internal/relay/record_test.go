package relay

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"
)

// TestRawBytesAfterCloseNotify: bytes a peer writes right after its close_notify, in the
// same burst, are left in the connection for the caller: crypto/tls reading through
// recordConn never reads past the alert. Reading through the bare connection, crypto/tls
// buffers them and they are lost; this is what lets a relay session go on raw.
func TestRawBytesAfterCloseNotify(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wrap  func(net.Conn) net.Conn
		whole bool
	}{
		{"through recordConn", func(c net.Conn) net.Conn { return &recordConn{Conn: c} }, true},
		{"bare, as a control", func(c net.Conn) net.Conn { return c }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			relay := newIdentity(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				hc := &holdConn{Conn: c}
				s := tls.Server(hc, &tls.Config{Certificates: []tls.Certificate{relay.Cert}, MinVersion: tls.VersionTLS13, SessionTicketsDisabled: true})
				if s.Handshake() != nil {
					return
				}
				// The reply, the close_notify and the raw bytes leave in one write, so they
				// reach the client together, as they may from a relay.
				hc.hold = true
				s.Write([]byte("paired"))
				s.CloseWrite()
				c.SetWriteDeadline(timeZero)
				c.Write(append(hc.held, "RAW BYTES"...))
				io.Copy(io.Discard, c)
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cl := tls.Client(tc.wrap(c), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
			buf := make([]byte, 6)
			if _, err := io.ReadFull(cl, buf); err != nil || string(buf) != "paired" {
				t.Fatalf("read %q, %v", buf, err)
			}
			if n, err := cl.Read(buf); n != 0 || err != io.EOF {
				t.Fatalf("after the reply: %d, %v; want the close_notify (EOF)", n, err)
			}
			c.SetReadDeadline(nowPlus(2))
			raw := make([]byte, 9)
			_, err = io.ReadFull(c, raw)
			if got := err == nil && string(raw) == "RAW BYTES"; got != tc.whole {
				t.Fatalf("raw bytes intact = %v (%q, %v), want %v", got, raw, err, tc.whole)
			}
		})
	}
}

var timeZero time.Time

// holdConn keeps what is written while hold is set, instead of sending it.
type holdConn struct {
	net.Conn
	hold bool
	held []byte
}

func (c *holdConn) Write(b []byte) (int, error) {
	if c.hold {
		c.held = append(c.held, b...)
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func nowPlus(sec int) time.Time { return time.Now().Add(time.Duration(sec) * time.Second) }
