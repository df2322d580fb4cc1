package transport

import (
	"net"
	"sync"
	"sync/atomic"
)

// coalesceMax is the largest write handed to the kernel while coalescing: 256 KiB turns the 64
// record-sized writes of a 1 MiB frame into 4 (BENCHMARKS.md, "link" table).
const coalesceMax = 256 << 10

// coalescer sits between crypto/tls and the socket. crypto/tls writes every TLS record (at most
// 16 KiB of plaintext) with a write system call of its own; on loopback and fast links those
// calls, not the cipher, bound throughput. While Conn.Write runs, the coalescer gathers the
// records and writes them in chunks of up to coalesceMax; at any other time (handshake,
// alerts) writes pass straight through.
type coalescer struct {
	net.Conn
	on atomic.Bool // set only inside Conn.Write, under writer.mu
	// mu guards buf. crypto/tls writes records under its output lock, but Conn.Write
	// flushes after crypto/tls returned, and a Close from another goroutine (the close_notify
	// alert) may write a record meanwhile: it is buffered and goes out with that flush.
	mu  sync.Mutex
	buf []byte
}

func (w *coalescer) Write(b []byte) (int, error) {
	if !w.on.Load() {
		return w.Conn.Write(b)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf)+len(b) > coalesceMax {
		if err := w.flushLocked(); err != nil {
			return 0, err
		}
		if len(b) >= coalesceMax {
			return w.Conn.Write(b)
		}
	}
	w.buf = append(w.buf, b...)
	return len(b), nil
}

func (w *coalescer) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

func (w *coalescer) flushLocked() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.Conn.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}

// writer serialises whole writes on a Conn so coalesced records of two writes never mix.
type writer struct {
	mu sync.Mutex
	co *coalescer
}

// Write sends b as TLS records coalesced into few system calls. It is safe for concurrent use;
// each call's bytes stay contiguous on the wire.
func (c *Conn) Write(b []byte) (int, error) { return c.WriteBuffers(b) }

// WriteBuffers sends the concatenation of bufs as Write sends one slice: contiguous on the
// wire, in coalesced records, flushed once. A frame whose head and bulk data live apart (a
// WRITE's) leaves without being copied into one buffer first.
func (c *Conn) WriteBuffers(bufs ...[]byte) (n int, err error) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	c.w.co.mu.Lock()
	if c.w.co.buf == nil {
		c.w.co.buf = make([]byte, 0, coalesceMax)
	}
	c.w.co.mu.Unlock()
	c.w.co.on.Store(true)
	for _, b := range bufs {
		var m int
		m, err = c.Conn.Write(b)
		n += m
		if err != nil {
			break
		}
	}
	c.w.co.on.Store(false)
	if ferr := c.w.co.flush(); err == nil {
		err = ferr
	}
	return n, err
}
