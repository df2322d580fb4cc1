package outbox

// The sender, in the order a batch travels:
//
//  1. fill (Run's goroutine): while fewer than Window batches are in flight, read the next ops
//     from the log (wal.Read: at most wire.MaxApplyOps and MaxBatchBytes, a larger op alone),
//     decide whether the batch asks for durability, fsync the log up to its last op, and
//  2. send it: one goroutine per batch calls Sender.Apply (in parallel, up to Window), fills
//     the batch's reply and closes its done channel. Batches of one generation share a
//     context, cancelled when the generation is dropped.
//  3. settle (Run's goroutine): replies are taken in batch order, a later one waits for the
//     earlier. Each op's result goes to OnResult once per process; then the owner's marks are
//     taken, the log acknowledged up to Durable, waiters woken.
//  4. restart: a Sender error, or a reply that answers fewer ops than the batch had (the owner
//     stopped early, or an earlier batch never reached it), drops the batches after it (their
//     replies are not waited for) and sends again from the first op without a result, or the
//     owner's Applied + 1 if lower. The owner skips what it had already applied. After an
//     error, or a reply that answered nothing, it waits a backoff first (50 ms doubling to
//     2 s; Kick ends it).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/peerfs/peerfs/internal/wal"
	"github.com/peerfs/peerfs/internal/wire"
)

// batch is one APPLY in flight. resp and err are written by its goroutine before done closes.
type batch struct {
	first uint64
	ops   []wire.ApplyOp
	sizes []int // each op's record in the log, header included
	sync  bool
	done  chan struct{}
	resp  wire.ApplyResp
	err   error
}

func (b *batch) last() uint64 { return b.first + uint64(len(b.ops)) - 1 }

// runner is one Run's state, owned by its goroutine.
type runner struct {
	o   *Outbox
	s   Sender
	ctx context.Context // Run's

	gen       context.Context // the batches in flight, cancelled with them
	cancelGen context.CancelFunc
	flight    []*batch       // sent, in seq order
	calls     sync.WaitGroup // every Apply goroutine, of every generation
	next      uint64         // the first op not yet sent in this generation

	synced    uint64 // the log is fsynced up to here
	syncAsked uint64 // the highest op a sync request in flight covers (0: none)
	sinceSync int64  // op bytes sent since the last request for durability

	failing bool // since the last reply that was taken
	backoff time.Duration
	retryAt time.Time
	timer   *time.Timer
}

// Run sends the journal to the owner through s until ctx ends (it returns ctx.Err()), Close
// is called (ErrClosed), or the owner turns out not to support APPLY (ErrUnsupported wrapped
// with the owner's error; the caller then sends changes one by one). Send errors do not end it:
// they show in Status, and it tries again after a backoff or a Kick. A damaged log, or an
// owner that has applied ops this log never held, end it with ErrDamaged. One Run at a time.
func (o *Outbox) Run(ctx context.Context, s Sender) error {
	o.mu.Lock()
	switch {
	case o.closed:
		o.mu.Unlock()
		return ErrClosed
	case o.running:
		o.mu.Unlock()
		return errors.New("outbox: Run is already running")
	case o.broken != nil:
		err := o.broken
		o.mu.Unlock()
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	o.running, o.stopRun, o.runDone, o.stopErr = true, stop, make(chan struct{}), nil
	o.mu.Unlock()

	r := &runner{o: o, s: s, ctx: runCtx, timer: time.NewTimer(time.Hour)}
	r.timer.Stop()
	r.restart()
	err := r.loop()
	r.cancelGen()
	stop()
	r.calls.Wait()

	o.mu.Lock()
	switch {
	case o.closed:
		err = ErrClosed
	case ctx.Err() != nil:
		err = ctx.Err()
	default:
		o.stopErr, o.lastErr, o.lastErrAt = err, err, time.Now()
		if errors.Is(err, ErrDamaged) {
			o.broken = err
		}
	}
	stopped := o.stopErr != nil
	o.running = false
	close(o.runDone)
	o.notify()
	o.mu.Unlock()
	if stopped {
		o.opts.Logger.Error("outbox: sending the journal stopped", "journal", o.id, "err", err)
	}
	return err
}

func (r *runner) loop() error {
	for {
		if err := r.fill(); err != nil {
			return err
		}
		var head chan struct{}
		if len(r.flight) > 0 {
			head = r.flight[0].done
		}
		r.arm()
		select {
		case <-r.ctx.Done():
			return r.ctx.Err()
		case <-head:
			b := r.flight[0]
			r.flight = r.flight[1:]
			if err := r.settle(b); err != nil {
				return err
			}
		case <-r.o.wake:
		case <-r.timer.C:
		}
	}
}

// fill sends batches while the window has room and there is something to send.
func (r *runner) fill() error {
	o := r.o
	for len(r.flight) < o.opts.Window {
		now := time.Now()
		last := o.Last()
		o.mu.Lock()
		if o.kicked {
			o.kicked = false
			r.retryAt, r.backoff = time.Time{}, 0
		}
		if last > o.durable && o.wantSync < last && now.Sub(time.Unix(0, o.lastAdd.Load())) >= o.opts.SyncAfter {
			o.wantSync = last // idle since the last op: have it all made durable, the log trimmed
		}
		want, durable := o.wantSync, o.durable
		o.mu.Unlock()
		if now.Before(r.retryAt) {
			return nil
		}
		needSync := want > durable && want > r.syncAsked
		if r.next > last {
			if !needSync {
				return nil
			}
			// Everything up to want is on its way or applied: a SYNC alone, which the owner
			// answers once the batches before it are applied.
			r.send(&batch{first: r.next, sync: true})
			continue
		}
		b, err := r.read()
		if err != nil {
			return err
		}
		r.sinceSync += int64(b.bytes())
		b.sync = needSync && b.last() >= want || r.sinceSync >= o.opts.SyncBytes
		if b.last() > r.synced {
			// The owner must never hold an op a power cut here could take back.
			upTo := o.Last()
			if err := o.syncLog(); err != nil {
				// After a failed fsync the kernel may have dropped the pages it could not
				// write and call the next fsync a success: nothing is sent after it.
				return fmt.Errorf("%w: the disk failed to make the log durable (%w), so it may have lost "+
					"changes; check the disk, and copy the directory %s somewhere safe before moving it aside",
					ErrDamaged, err, o.opts.Dir)
			}
			r.synced = upTo
		}
		r.send(b)
	}
	return nil
}

// read takes the next batch from the log.
func (r *runner) read() (*batch, error) {
	o := r.o
	recs, err := o.log.Read(r.next, wire.MaxApplyOps, o.opts.MaxBatchBytes)
	if err != nil {
		var ce *wal.CorruptError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("%w: %w", ErrDamaged, err)
		}
		return nil, fmt.Errorf("outbox: reading the log: %w", err)
	}
	if len(recs) == 0 || recs[0].Seq != r.next {
		return nil, fmt.Errorf("%w: the log has no op %d (acknowledged up to %d)", ErrDamaged, r.next, o.log.Acked())
	}
	b := &batch{first: r.next, ops: make([]wire.ApplyOp, len(recs)), sizes: make([]int, len(recs))}
	for i, rec := range recs {
		if err := b.ops[i].Decode(rec.Data); err != nil {
			return nil, fmt.Errorf("%w: op %d in the log: %w", ErrDamaged, rec.Seq, err)
		}
		b.sizes[i] = wal.RecordHeaderLen + len(rec.Data)
	}
	return b, nil
}

func (b *batch) bytes() int {
	n := 0
	for _, s := range b.sizes {
		n += s - wal.RecordHeaderLen
	}
	return n
}

// send starts b's APPLY.
func (r *runner) send(b *batch) {
	if b.sync {
		r.syncAsked = b.first + uint64(len(b.ops)) - 1
		r.sinceSync = 0
	}
	req := wire.ApplyReq{Journal: r.o.id, First: b.first, Ops: b.ops}
	if b.sync {
		req.Flags = wire.ApplySync
	}
	b.done = make(chan struct{})
	ctx := r.gen
	r.calls.Go(func() {
		b.resp, b.err = r.s.Apply(ctx, req)
		close(b.done)
	})
	r.flight = append(r.flight, b)
	r.next = b.first + uint64(len(b.ops))
}

// settle takes b's reply, the earliest in flight.
func (r *runner) settle(b *batch) error {
	o := r.o
	if r.ctx.Err() != nil {
		return r.ctx.Err()
	}
	if b.err != nil {
		if errors.Is(b.err, wire.ErrnoUnsupported) {
			return fmt.Errorf("%w: %w", ErrUnsupported, b.err)
		}
		var re *wire.RemoteError
		r.fail(b.err, errors.As(b.err, &re))
		return nil
	}
	resp := &b.resp
	n := len(resp.Results)
	switch {
	case n > len(b.ops):
		r.fail(fmt.Errorf("the owner answered %d results to an APPLY of %d ops", n, len(b.ops)), true)
		return nil
	case resp.Durable > resp.Applied:
		r.fail(fmt.Errorf("the owner's durable mark %d is past its applied mark %d", resp.Durable, resp.Applied), true)
		return nil
	case n > 0 && resp.Applied < b.first+uint64(n)-1:
		r.fail(fmt.Errorf("the owner answered ops up to %d but says it applied up to %d", b.first+uint64(n)-1, resp.Applied), true)
		return nil
	case resp.Applied > o.Last():
		return fmt.Errorf("%w: the owner has applied op %d of journal %v, but this log ends at op %d: "+
			"the log was replaced or restored from a copy; move the directory %s aside to start a new journal",
			ErrDamaged, resp.Applied, o.id, o.Last(), o.opts.Dir)
	}

	// Results first, so that a waiter woken below finds what OnResult recorded.
	o.mu.Lock()
	answered := o.answered
	o.mu.Unlock()
	var failed, conflicts uint64
	var bytes int64
	for i, res := range resp.Results {
		seq := b.first + uint64(i)
		if seq <= answered {
			continue // sent again after a restart, and answered before
		}
		if seq != answered+1 {
			panic(fmt.Sprintf("outbox: result of op %d after op %d", seq, answered))
		}
		if res.Code != 0 {
			failed++
			if res.Code == wire.ErrnoConflict {
				conflicts++
			}
		}
		if o.opts.OnResult != nil {
			o.opts.OnResult(seq, b.ops[i], res)
		}
		answered = seq
		bytes += int64(b.sizes[i])
	}
	o.unanswered.Add(-bytes)

	o.mu.Lock()
	if resp.Applied < o.applied {
		o.opts.Logger.Warn("outbox: the owner's applied mark went back (it lost changes it had not made durable); sending them again",
			"journal", o.id, "was", o.applied, "now", resp.Applied)
	}
	o.applied = resp.Applied
	durable := max(o.durable, resp.Durable)
	o.mu.Unlock()
	// The log keeps an op until it is durable on the owner and answered here: a restart of
	// the sending reads it again for its result.
	if ack := min(durable, answered); ack > o.log.Acked() {
		if err := o.log.Ack(ack); err != nil {
			o.opts.Logger.Warn("outbox: trimming the log", "journal", o.id, "err", err)
		}
	}
	o.mu.Lock()
	o.durable, o.answered, o.online = durable, answered, true
	o.failed += failed
	o.conflicts += conflicts
	o.notify()
	o.mu.Unlock()
	if r.failing {
		r.failing = false
		o.opts.Logger.Info("outbox: the owner takes the journal again", "journal", o.id)
	}
	if b.sync && r.syncAsked == b.first+uint64(len(b.ops))-1 && durable < r.syncAsked {
		r.syncAsked = durable // not made durable as far as asked: ask again
	}

	gap := len(b.ops) == 0 && resp.Applied+1 < b.first
	if n < len(b.ops) || gap {
		if n == 0 {
			r.later()
		}
		r.restart()
		return nil
	}
	r.backoff = 0
	return nil
}

// fail records a send that failed, with a reply from the owner (an ERROR: a read-only share)
// or without (no link), and starts again after a backoff. It logs the first failure of a run.
func (r *runner) fail(err error, answered bool) {
	o := r.o
	o.mu.Lock()
	o.online, o.lastErr, o.lastErrAt = answered, err, time.Now()
	o.notify()
	o.mu.Unlock()
	if !r.failing {
		r.failing = true
		o.opts.Logger.Warn("outbox: sending the journal failed; retrying", "journal", o.id, "err", err)
	}
	r.later()
	r.restart()
}

// later sets the backoff before the next send.
func (r *runner) later() {
	r.backoff = min(max(2*r.backoff, r.o.backoffMin), r.o.backoffMax)
	r.retryAt = time.Now().Add(r.backoff)
}

// restart drops the batches in flight and sends again from the first op without a result,
// or the owner's Applied + 1 if lower (the log holds both: it is acknowledged only up to
// what was answered).
func (r *runner) restart() {
	if r.cancelGen != nil {
		r.cancelGen()
	}
	r.gen, r.cancelGen = context.WithCancel(r.ctx)
	r.flight = nil
	o := r.o
	o.mu.Lock()
	from := min(o.answered, o.applied)
	o.mu.Unlock()
	r.next = max(from, o.log.Acked()) + 1
	r.syncAsked = 0
}

// arm sets the timer to the next moment fill has something to do without being woken: the
// end of a backoff, or an idle SyncAfter since the last op.
func (r *runner) arm() {
	o := r.o
	var at time.Time
	if len(r.flight) < o.opts.Window && time.Now().Before(r.retryAt) {
		at = r.retryAt
	}
	last := o.Last()
	o.mu.Lock()
	idle := last > o.durable && o.wantSync < last
	o.mu.Unlock()
	if idle {
		syncAt := time.Unix(0, o.lastAdd.Load()).Add(o.opts.SyncAfter)
		if at.IsZero() || syncAt.Before(at) {
			at = syncAt
		}
	}
	if at.IsZero() {
		r.timer.Stop()
		return
	}
	r.timer.Reset(max(time.Until(at), 0))
}
