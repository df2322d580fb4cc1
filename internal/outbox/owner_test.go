package outbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/wire"
)

var (
	errOffline = errors.New("test owner: unreachable")
	errLost    = errors.New("test owner: link reset")
)

// owner is an in-memory owner of one journal for the tests. It follows PROTOCOL.md's APPLY:
// ops applied one at a time in seq order, each once (an op at or below Applied is answered
// with an empty body), a batch beyond Applied + 1 waits gapWait for the ones before it and
// then gets no results, SYNC makes everything applied durable. Faults on demand: offline,
// UNSUPPORTED, requests or replies lost at random, replies cut short at random, delays.
type owner struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced when applied moves

	journal    wire.JournalID
	hasJournal bool
	applied    uint64
	durable    uint64
	state      []string // the bodies of the ops applied, state[i] is op i+1's
	applies    []int    // how many times op i+1 was applied
	discard    bool     // keep no state (benchmarks)
	violations []string

	// Counters.
	calls, inFlight, maxInFlight int
	skipped                      int // ops answered empty: already applied
	syncs, emptySyncs            int

	// Behaviour.
	gapWait     time.Duration
	delay       time.Duration // per APPLY; with rng, up to this
	offline     bool
	unsupported bool
	refuse      wire.Errno    // every APPLY fails with this ERROR
	lateMarks   time.Duration // the marks of a reply are read this long after its ops were applied
	rng         *rand.Rand
	pLostBefore float64 // request lost: nothing applied
	pLostAfter  float64 // reply lost: applied
	pPartial    float64 // the reply stops early
	code        func(seq uint64) wire.Errno
}

func newOwner() *owner {
	return &owner{changed: make(chan struct{}), gapWait: 200 * time.Millisecond}
}

func (w *owner) set(f func(w *owner)) {
	w.mu.Lock()
	f(w)
	w.mu.Unlock()
}

func (w *owner) Apply(ctx context.Context, req wire.ApplyReq) (wire.ApplyResp, error) {
	w.mu.Lock()
	w.calls++
	w.inFlight++
	w.maxInFlight = max(w.maxInFlight, w.inFlight)
	lostBefore, lostAfter, cut := false, false, -1
	delay := w.delay
	if w.rng != nil {
		lostBefore = w.rng.Float64() < w.pLostBefore
		lostAfter = w.rng.Float64() < w.pLostAfter
		if len(req.Ops) > 0 && w.rng.Float64() < w.pPartial {
			cut = w.rng.IntN(len(req.Ops))
		}
		if delay > 0 {
			delay = time.Duration(w.rng.Int64N(int64(delay)))
		}
	}
	offline, unsupported, refuse := w.offline, w.unsupported, w.refuse
	w.mu.Unlock()
	defer w.set(func(w *owner) { w.inFlight-- })

	switch {
	case unsupported:
		return wire.ApplyResp{}, &wire.RemoteError{Code: wire.ErrnoUnsupported, Message: "request APPLY is not supported by this peer"}
	case offline:
		return wire.ApplyResp{}, errOffline
	case refuse != 0:
		return wire.ApplyResp{}, &wire.RemoteError{Code: refuse}
	case lostBefore:
		return wire.ApplyResp{}, errLost
	}
	if err := sleep(ctx, delay); err != nil {
		return wire.ApplyResp{}, err
	}
	// What the real owner would refuse: a request that does not fit a frame or decode
	// (with its share named, as remote.Share does).
	req.Share = "share"
	b := req.AppendTo(nil)
	var back wire.ApplyReq
	if err := back.Decode(b); err != nil || len(b)+wire.MaxShareNameLen > wire.MaxFrameLen {
		w.set(func(w *owner) { w.violations = append(w.violations, fmt.Sprintf("%d bytes: %v", len(b), err)) })
		return wire.ApplyResp{}, &wire.RemoteError{Code: wire.ErrnoProtocol}
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.hasJournal {
		w.journal, w.hasJournal = req.Journal, true
	} else if req.Journal != w.journal {
		w.violations = append(w.violations, fmt.Sprintf("journal %v, then %v", w.journal, req.Journal))
	}
	deadline := time.Now().Add(w.gapWait)
	for req.First > w.applied+1 {
		left := time.Until(deadline)
		if left <= 0 {
			return wire.ApplyResp{Applied: w.applied, Durable: w.durable}, nil
		}
		ch := w.changed
		w.mu.Unlock()
		err := waitOr(ctx, ch, left)
		w.mu.Lock()
		if err != nil {
			return wire.ApplyResp{}, err
		}
	}
	var resp wire.ApplyResp
	for i, op := range req.Ops {
		if i == cut {
			break
		}
		seq := req.First + uint64(i)
		if seq <= w.applied {
			w.skipped++
			resp.Results = append(resp.Results, wire.ApplyResult{})
			continue
		}
		w.applied = seq
		if !w.discard {
			w.state = append(w.state, string(op.Body))
			for uint64(len(w.applies)) < seq {
				w.applies = append(w.applies, 0)
			}
			w.applies[seq-1]++
		}
		r := wire.ApplyResult{Body: []byte("ok " + strconv.FormatUint(seq, 10))}
		if w.code != nil {
			if r.Code = w.code(seq); r.Code != 0 {
				r.Body = []byte(r.Code.String())
			}
		}
		resp.Results = append(resp.Results, r)
	}
	if req.Flags&wire.ApplySync != 0 {
		w.durable = w.applied
		w.syncs++
		if len(req.Ops) == 0 {
			w.emptySyncs++
		}
	}
	close(w.changed)
	w.changed = make(chan struct{})
	if w.lateMarks > 0 {
		// The later batches in flight are applied meanwhile: the marks cover ops whose
		// results come in their own replies.
		w.mu.Unlock()
		time.Sleep(w.lateMarks)
		w.mu.Lock()
	}
	resp.Applied, resp.Durable = w.applied, w.durable
	if lostAfter {
		return wire.ApplyResp{}, errLost
	}
	return resp, nil
}

// powerCut loses what was not durable, as an owner's power cut would.
func (w *owner) powerCut() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.applied = w.durable
	w.state = w.state[:w.durable]
}

// counters are the owner's counts at one moment.
type counters struct{ calls, maxInFlight, skipped, syncs, emptySyncs int }

func (w *owner) counts() counters {
	w.mu.Lock()
	defer w.mu.Unlock()
	return counters{w.calls, w.maxInFlight, w.skipped, w.syncs, w.emptySyncs}
}

func (w *owner) marks() (applied, durable uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.applied, w.durable
}

// check fails t unless the owner's state is exactly want (want[i] the body of op i+1), each op
// applied once (unless reapplied: a power cut made it apply some again), with no violation.
func (w *owner) check(t *testing.T, want []string, reapplied bool) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.violations {
		t.Errorf("the owner would have refused an APPLY: %s", v)
	}
	if len(w.state) != len(want) {
		t.Fatalf("the owner applied %d ops, want %d", len(w.state), len(want))
	}
	for i := range want {
		if w.state[i] != want[i] {
			t.Fatalf("op %d on the owner is %q, want %q", i+1, w.state[i], want[i])
		}
		if !reapplied && w.applies[i] != 1 {
			t.Fatalf("op %d was applied %d times", i+1, w.applies[i])
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func waitOr(ctx context.Context, ch <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-ch:
	case <-t.C:
	}
	return nil
}
