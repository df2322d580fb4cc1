package relay

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/time/rate"
)

// Splicing: one goroutine per direction (runHalf), reading from its device and writing to
// the other. Between two TCP sockets, io.Copy becomes splice(2) on Linux (net.TCPConn's
// ReadFrom): bytes go socket → pipe → socket in the kernel, never through a user buffer.
// The relay copies in chunks only to count bytes, apply rate limits and see progress.
const (
	// spliceChunk is the most one splice call moves between counter updates.
	spliceChunk = 1 << 20
	// copyBuf is the user-space buffer when a side is a WebSocket.
	copyBuf = 64 << 10
)

// burst is the token bucket size for rate r bytes/s: a tenth of a second of traffic, at
// least one copy buffer, so a chunk never waits for more than the bucket holds.
func burst(r rate.Limit) int {
	b := int(r / 10)
	if b < copyBuf {
		b = copyBuf
	}
	return b
}

// pump copies src's bytes to dst until src ends, then half-closes dst (a TCP FIN), so the
// other direction can still finish. It returns an error if the session should end now.
func (s *Server) pump(ss *session, dst, src *waiter) error {
	dt, dok := dst.raw.(*net.TCPConn)
	st, sok := src.raw.(*net.TCPConn)
	var err error
	if dok && sok && ss.limit == nil && s.global == nil {
		err = s.splice(ss, dt, st)
	} else {
		err = s.copyLimited(ss, dst.stream, src.stream)
	}
	if err != nil {
		return err
	}
	if cw, ok := dst.raw.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	// A WebSocket has no half-close: the session ends when the other direction does.
	return nil
}

// splice moves bytes between two TCP sockets in the kernel. A read deadline of a quarter
// of the idle timeout makes each chunk return often enough for the idle watch to see
// progress; a deadline with no progress is not an error: the watch decides on idleness.
func (s *Server) splice(ss *session, dst, src *net.TCPConn) error {
	lr := &io.LimitedReader{R: src}
	period := s.cfg.IdleTimeout / 4
	for {
		src.SetReadDeadline(time.Now().Add(period))
		lr.N = spliceChunk
		n, err := dst.ReadFrom(lr)
		if n > 0 {
			s.moved(ss, n)
		}
		switch {
		case err == nil && lr.N > 0:
			return nil // src ended
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
		default:
			return err
		}
	}
}

// copyLimited copies through a user buffer, waiting for the rate limits before each write.
func (s *Server) copyLimited(ss *session, dst, src net.Conn) error {
	buf := make([]byte, copyBuf)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-ss.finished:
		case <-ctx.Done():
		}
		cancel()
	}()
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if ss.limit != nil {
				if err := ss.limit.WaitN(ctx, n); err != nil {
					return err
				}
			}
			if s.global != nil {
				if err := s.global.WaitN(ctx, n); err != nil {
					return err
				}
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return err
			}
			s.moved(ss, int64(n))
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

func (s *Server) moved(ss *session, n int64) {
	ss.last.Store(time.Now().UnixNano())
	s.stats.bytes.Add(n)
}
