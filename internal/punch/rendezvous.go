package punch

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Rendezvous coordinates one attempt over rw, a stream to the peer that carries nothing else
// meanwhile (a relayed link, or a stream of it), and returns the peer's candidates and the
// round-trip time it measured, at the moment to call Punch:
//
//	opener:    CANDIDATES(attempt) ->            (measures the round trip)
//	                               <- CANDIDATES(attempt)
//	           START(attempt)      ->
//	           waits RTT/2, returns                returns as START arrives
//
// so both sides' SYNs leave about when START reaches the other side. The side that opens
// passes opener = true and picks attempt; the other answers with the opener's attempt (its
// own attempt argument is not used). ctx bounds the exchange when rw has deadlines (a
// net.Conn).
func Rendezvous(ctx context.Context, rw io.ReadWriter, opener bool, attempt uint32, own []Candidate) ([]Candidate, time.Duration, error) {
	if d, ok := rw.(interface{ SetDeadline(time.Time) error }); ok {
		expired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			d.SetDeadline(time.Unix(1, 0))
			close(expired)
		})
		defer func() {
			if !stop() {
				// The stream outlives the attempt: lift the deadline set above.
				<-expired
				d.SetDeadline(time.Time{})
			}
		}()
	}
	fail := func(err error) ([]Candidate, time.Duration, error) {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return nil, 0, fmt.Errorf("punch rendezvous: %w", err)
	}
	expect := func(t MsgType, attempt uint32) (*Message, error) {
		m, err := ReadMessage(rw)
		if err != nil {
			return nil, err
		}
		if m.Type != t || m.Attempt != attempt {
			return nil, fmt.Errorf("%w: got %s of attempt %d, want %s of attempt %d", ErrBadMsg, m.Type, m.Attempt, t, attempt)
		}
		return m, nil
	}
	if opener {
		sent := time.Now()
		if err := WriteMessage(rw, &Message{Type: MsgCandidates, Attempt: attempt, Candidates: own}); err != nil {
			return fail(err)
		}
		m, err := expect(MsgCandidates, attempt)
		if err != nil {
			return fail(err)
		}
		rtt := time.Since(sent)
		if err := WriteMessage(rw, &Message{Type: MsgStart, Attempt: attempt}); err != nil {
			return fail(err)
		}
		select {
		case <-time.After(rtt / 2):
		case <-ctx.Done():
			return fail(ctx.Err())
		}
		return m.Candidates, rtt, nil
	}
	m, err := ReadMessage(rw)
	if err != nil {
		return fail(err)
	}
	if m.Type != MsgCandidates {
		return fail(fmt.Errorf("%w: got %s first, want CANDIDATES", ErrBadMsg, m.Type))
	}
	sent := time.Now()
	if err := WriteMessage(rw, &Message{Type: MsgCandidates, Attempt: m.Attempt, Candidates: own}); err != nil {
		return fail(err)
	}
	if _, err := expect(MsgStart, m.Attempt); err != nil {
		return fail(err)
	}
	return m.Candidates, time.Since(sent), nil
}
