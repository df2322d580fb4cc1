package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrMalformed is wrapped by every body decoding error: the frame does not parse as its op's
// message. It is a protocol violation.
var ErrMalformed = errors.New("malformed message")

// encoder appends big-endian fields to a byte slice.
type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u16(v uint16) { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *encoder) i64(v int64)  { e.u64(uint64(v)) }

// str writes a uint16 length then the bytes.
func (e *encoder) str(s string) {
	e.u16(uint16(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) bytes(p []byte) {
	e.u32(uint32(len(p)))
	e.b = append(e.b, p...)
}

// decoder reads fields; the first failure sticks and later reads return zero values, so a
// message decoder checks err once at the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated at %s", ErrMalformed, what)
	}
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.fail(what)
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u8(what string) uint8 {
	if p := d.take(1, what); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u16(what string) uint16 {
	if p := d.take(2, what); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (d *decoder) u32(what string) uint32 {
	if p := d.take(4, what); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64(what string) uint64 {
	if p := d.take(8, what); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) i64(what string) int64 { return int64(d.u64(what)) }

// str reads a length-prefixed string no longer than max bytes.
func (d *decoder) str(what string, max int) string {
	n := int(d.u16(what))
	if d.err == nil && n > max {
		d.err = fmt.Errorf("%w: %s is %d bytes, limit %d", ErrMalformed, what, n, max)
		return ""
	}
	return string(d.take(n, what))
}

func (d *decoder) bytes(what string, max int) []byte {
	n := int(d.u32(what))
	if d.err == nil && n > max {
		d.err = fmt.Errorf("%w: %s is %d bytes, limit %d", ErrMalformed, what, n, max)
		return nil
	}
	p := d.take(n, what)
	if p == nil {
		return nil
	}
	return append([]byte(nil), p...)
}

// path reads a share-relative path and validates it with CheckPath.
func (d *decoder) path(what string) string {
	p := d.str(what, MaxPathLen)
	if d.err == nil {
		if err := CheckPath(p); err != nil {
			d.err = fmt.Errorf("%w: %s: %w", ErrMalformed, what, err)
		}
	}
	return p
}

// share reads a share name and validates it with CheckShareName.
func (d *decoder) share() string {
	s := d.str("share", MaxShareNameLen)
	if d.err == nil {
		if err := CheckShareName(s); err != nil {
			d.err = err
		}
	}
	return s
}

// done fails if bytes remain: every message has an exact length.
func (d *decoder) done(msg string) error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes after %s", ErrMalformed, len(d.b), msg)
	}
	return d.err
}
