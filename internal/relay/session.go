package relay

import (
	"crypto/tls"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// A waiter is a joined connection: pending until a join of the other role names one of its
// IDs, then one half of a session.
//
//	joined ──(partner found)──> paired ──(reply, close_notify both ways)──> spliced ──> closed
//	   │ └──(PendingTimeout, device gone, replaced, relay closing)──> refused ──> closed
type waiter struct {
	role     Role
	ids      []ID
	tls      *tls.Conn
	stream   net.Conn // under tls: the TCP connection, or a WebSocket's stream
	raw      net.Conn // the TCP connection to splice, nil for a WebSocket
	observed netip.AddrPort

	done     chan pairing  // the pairing, or a refusal; buffered, sent once under Server.mu
	writable chan struct{} // closed once PAIRED and our close_notify are out: raw bytes may follow
	readDone chan error    // the device's close_notify (nil), or why its connection ended
}

type pairing struct {
	partner *waiter
	sess    *session
	matched ID
	code    Code
	msg     string
}

// session is two paired waiters; it ends, closing both, when both directions have ended
// or when either fails.
type session struct {
	a, b     *waiter
	limit    *rate.Limiter // per session, both directions; nil when unlimited
	last     atomic.Int64  // Unix nanoseconds of the last byte moved
	pumps    sync.WaitGroup
	once     sync.Once
	freed    sync.Once
	finished chan struct{}
}

func (ss *session) close() {
	ss.once.Do(func() {
		close(ss.finished)
		ss.a.stream.Close()
		ss.b.stream.Close()
	})
}

// rendezvous pairs w or parks it, then runs its half of the session.
func (s *Server) rendezvous(w *waiter) {
	p, ok := s.match(w)
	if !ok {
		timer := time.NewTimer(s.cfg.PendingTimeout)
		select {
		case p = <-w.done:
		case err := <-w.readDone:
			// Gone, or speaking out of turn, before a partner came.
			if s.unpark(w) {
				if err != nil {
					s.cfg.Log.Debug("relay: waiting device left", "err", err)
				}
				timer.Stop()
				return
			}
			p = <-w.done
			w.readDone <- err
		case <-timer.C:
			if s.unpark(w) {
				s.stats.refused(refusedTimeout)
				s.sendReply(w.tls, &reply{Code: CodeTimeout, Message: "no peer joined within " + s.cfg.PendingTimeout.String()})
				return
			}
			p = <-w.done
		case <-s.closing:
			if s.unpark(w) {
				s.sendReply(w.tls, &reply{Code: CodeClosing, Message: "relay shutting down"})
				return
			}
			p = <-w.done
		}
		timer.Stop()
	}
	if p.code != CodePaired {
		s.sendReply(w.tls, &reply{Code: p.code, Message: p.msg})
		return
	}
	s.runHalf(w, p)
}

// match pairs w with a waiting join of the other role that names one of its IDs, or parks
// w. It reports whether w is paired (the pairing is then in the result).
func (s *Server) match(w *waiter) (pairing, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return pairing{code: CodeClosing, msg: "relay shutting down"}, true
	}
	others := s.mu.pending[w.role.other()]
	for _, id := range w.ids {
		p := others[id]
		if p == nil {
			continue
		}
		if s.mu.sessions >= s.cfg.MaxSessions {
			s.stats.refused(refusedFull)
			return pairing{code: CodeFull, msg: "the relay holds as many sessions as it may"}, true
		}
		s.unparkLocked(p)
		s.mu.sessions++
		s.stats.sessionsTotal.Add(1)
		ss := &session{a: p, b: w, finished: make(chan struct{})}
		if s.cfg.SessionRate > 0 {
			ss.limit = rate.NewLimiter(s.cfg.SessionRate, burst(s.cfg.SessionRate))
		}
		ss.last.Store(time.Now().UnixNano())
		ss.pumps.Add(2)
		p.done <- pairing{partner: w, sess: ss, matched: id, code: CodePaired}
		go s.watch(ss)
		return pairing{partner: p, sess: ss, matched: id, code: CodePaired}, true
	}
	if s.mu.npending >= s.cfg.MaxPending {
		s.stats.refused(refusedFull)
		return pairing{code: CodeFull, msg: "the relay holds as many waiting joins as it may"}, true
	}
	mine := s.mu.pending[w.role]
	for _, id := range w.ids {
		if old := mine[id]; old != nil && old != w {
			// The newer join wins: the older is most likely a stale connection of the
			// same device.
			s.unparkLocked(old)
			s.stats.refused(refusedReplaced)
			old.done <- pairing{code: CodeReplaced, msg: "a newer join names the same rendezvous"}
		}
		mine[id] = w
	}
	s.mu.npending++
	return pairing{}, false
}

// unpark removes w from the waiting joins; false if it was no longer there (paired or
// refused meanwhile: its pairing is in w.done).
func (s *Server) unpark(w *waiter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unparkLocked(w)
}

func (s *Server) unparkLocked(w *waiter) bool {
	mine := s.mu.pending[w.role]
	found := false
	for _, id := range w.ids {
		if mine[id] == w {
			delete(mine, id)
			found = true
		}
	}
	if found {
		s.mu.npending--
	}
	return found
}

// runHalf finishes w's side of the join and pumps w's bytes to its partner:
//
//  1. send PAIRED and close_notify to w; from now on w may receive raw bytes;
//  2. wait for w's close_notify: nothing of w's is left in its TLS session;
//  3. wait until the partner may receive raw bytes (its step 1);
//  4. pump w → partner until w's end closes, then half-close the partner's writing side.
//
// The partner's goroutine does the same the other way; the last pump to finish closes both.
func (s *Server) runHalf(w *waiter, p pairing) {
	ss := p.sess
	defer func() {
		ss.pumps.Done()
		ss.pumps.Wait()
		ss.close()
		// Both halves get here; the session's place is given back once.
		ss.freed.Do(func() {
			s.mu.Lock()
			s.mu.sessions--
			s.mu.Unlock()
		})
	}()
	// 1.
	w.stream.SetDeadline(time.Now().Add(s.cfg.JoinTimeout))
	_, err := w.tls.Write((&reply{Code: CodePaired, Matched: p.matched, Observed: w.observed}).encode())
	if err == nil {
		err = w.tls.CloseWrite()
	}
	if err != nil {
		ss.close()
		return
	}
	// crypto/tls leaves a write deadline of "now" on the connection after close_notify
	// (closeNotify in crypto/tls/conn.go), which would fail the partner's first write.
	w.stream.SetWriteDeadline(time.Time{})
	close(w.writable)
	// 2.
	select {
	case err = <-w.readDone:
	case <-ss.finished:
		return
	}
	if err != nil {
		ss.close()
		return
	}
	w.stream.SetDeadline(time.Time{})
	// 3.
	select {
	case <-p.partner.writable:
	case <-ss.finished:
		return
	}
	// 4.
	err = s.pump(ss, p.partner, w)
	if err != nil {
		ss.close()
	}
}

// watch ends ss when no byte moved through it for IdleTimeout.
func (s *Server) watch(ss *session) {
	tick := time.NewTicker(s.cfg.IdleTimeout / 4)
	defer tick.Stop()
	for {
		select {
		case <-ss.finished:
			return
		case <-s.closing:
			ss.close()
			return
		case now := <-tick.C:
			if now.Sub(time.Unix(0, ss.last.Load())) > s.cfg.IdleTimeout {
				s.stats.idleEnded.Add(1)
				ss.close()
				return
			}
		}
	}
}
