package peertest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP relay between two nodes that a test can cut: every connection through it is
// closed at once, as a network partition would, while new connections still go through.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
}

// NewProxy relays 127.0.0.1:<port> to target until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	go p.acceptLoop()
	t.Cleanup(func() { ln.Close(); p.CutAll() })
	return p
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// CutAll closes every relayed connection.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (p *Proxy) acceptLoop() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go relay(in, out)
		go relay(out, in)
	}
}

func relay(dst, src net.Conn) {
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}
