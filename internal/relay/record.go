package relay

import (
	"encoding/binary"
	"net"
)

// recordConn hands crypto/tls the bytes of one TLS record at a time and never a byte past
// the record it is in. crypto/tls reads ahead into its own buffer whenever the socket has
// more, and gives no way back to those bytes; the relay and its clients end the TLS session
// with close_notify and go on with the same TCP stream raw, so no byte after that alert may
// be consumed by crypto/tls. The TLS record header (type, version, 2-byte length) is
// always in clear, so the boundary is known without decrypting. The cost is two reads per
// record, only for the few records of a join.
type recordConn struct {
	net.Conn
	hdr  [5]byte
	nhdr int // header bytes read so far
	body int // bytes left in the current record's body
	// passthrough lifts the limit, for a TLS session that is kept (a WebSocket inside TLS);
	// set before the next Read, by the goroutine that reads.
	passthrough bool
}

func (r *recordConn) Read(p []byte) (int, error) {
	if r.passthrough {
		return r.Conn.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if r.body == 0 {
		if want := len(r.hdr) - r.nhdr; len(p) > want {
			p = p[:want]
		}
		n, err := r.Conn.Read(p)
		copy(r.hdr[r.nhdr:], p[:n])
		r.nhdr += n
		if r.nhdr == len(r.hdr) {
			r.nhdr = 0
			r.body = int(binary.BigEndian.Uint16(r.hdr[3:5]))
		}
		return n, err
	}
	if len(p) > r.body {
		p = p[:r.body]
	}
	n, err := r.Conn.Read(p)
	r.body -= n
	return n, err
}

// prefixConn is a connection whose first bytes were already read (to sniff the protocol).
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
