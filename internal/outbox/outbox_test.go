package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/wal"
	"github.com/peerfs/peerfs/internal/wire"
)

// results records what OnResult was given.
type results struct {
	mu    sync.Mutex
	seqs  []uint64
	ops   []string
	codes []wire.Errno
}

func (r *results) add(seq uint64, op wire.ApplyOp, res wire.ApplyResult) {
	r.mu.Lock()
	r.seqs = append(r.seqs, seq)
	r.ops = append(r.ops, string(op.Body))
	r.codes = append(r.codes, res.Code)
	r.mu.Unlock()
}

// check fails t unless OnResult saw ops from..to once each, in order, with their bodies.
func (r *results) check(t *testing.T, from, to uint64, want []string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if uint64(len(r.seqs)) != to-from+1 {
		t.Fatalf("OnResult was called %d times, want %d (ops %d to %d)", len(r.seqs), to-from+1, from, to)
	}
	for i, seq := range r.seqs {
		if seq != from+uint64(i) {
			t.Fatalf("OnResult call %d was for op %d, want %d", i, seq, from+uint64(i))
		}
		if r.ops[i] != want[seq-1] {
			t.Fatalf("OnResult for op %d got %q, want %q", seq, r.ops[i], want[seq-1])
		}
	}
}

var quiet = slog.New(slog.DiscardHandler)

func writeOp(body string) wire.ApplyOp { return wire.ApplyOp{Op: wire.OpWrite, Body: []byte(body)} }

func openT(t testing.TB, opts Options) *Outbox {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	o, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// run starts o.Run with s; the returned function stops it and returns what Run returned.
func run(t testing.TB, o *Outbox, s Sender) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx, s) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func timeout(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// adder adds ops from several goroutines and remembers which seq each body got.
type adder struct {
	mu     sync.Mutex
	bodies []string // bodies[seq-1]
}

func (a *adder) put(first uint64, bodies ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, b := range bodies {
		seq := first + uint64(i)
		for uint64(len(a.bodies)) < seq {
			a.bodies = append(a.bodies, "")
		}
		a.bodies[seq-1] = b
	}
}

// addFrom adds n ops from each of g goroutines, every seventh round a batch of three.
func (a *adder) addFrom(t *testing.T, o *Outbox, g, n int, tag string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, g)
	for gi := range g {
		wg.Go(func() {
			for i := 0; i < n; {
				if i%7 == 0 && i+3 <= n {
					bodies := []string{fmt.Sprintf("%s%d-%05d", tag, gi, i), fmt.Sprintf("%s%d-%05d", tag, gi, i+1), fmt.Sprintf("%s%d-%05d", tag, gi, i+2)}
					first, err := o.AddBatch([]wire.ApplyOp{writeOp(bodies[0]), writeOp(bodies[1]), writeOp(bodies[2])})
					if err != nil {
						errs <- err
						return
					}
					a.put(first, bodies...)
					i += 3
					continue
				}
				body := fmt.Sprintf("%s%d-%05d", tag, gi, i)
				seq, err := o.Add(writeOp(body))
				if err != nil {
					errs <- err
					return
				}
				a.put(seq, body)
				i++
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func (a *adder) all() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.bodies...)
}

// 10,000 ops added from 4 goroutines while Run sends reach the owner once each, in seq order,
// several batches at once; OnResult sees each once, in order; after a Sync the log is empty.
func TestDrainInOrderPipelined(t *testing.T) {
	w := newOwner()
	w.delay = 2 * time.Millisecond
	w.code = func(seq uint64) wire.Errno {
		switch {
		case seq%101 == 0:
			return wire.ErrnoConflict
		case seq%97 == 0:
			return wire.EACCES
		}
		return 0
	}
	var got results
	o := openT(t, Options{Dir: t.TempDir(), MaxBatchBytes: 4 << 10, SyncAfter: time.Hour, OnResult: got.add})
	run(t, o, w)
	var a adder
	a.addFrom(t, o, 4, 2500, "g")
	ctx := timeout(t)
	if err := o.Sync(ctx, o.Last()); err != nil {
		t.Fatal(err)
	}
	want := a.all()
	if len(want) != 10000 || o.Last() != 10000 {
		t.Fatalf("%d ops added, last seq %d", len(want), o.Last())
	}
	w.check(t, want, false)
	got.check(t, 1, 10000, want)
	if _, durable := w.marks(); durable != 10000 {
		t.Errorf("Sync returned with the owner durable up to %d", durable)
	}
	if p := o.log.Pending(); p.Records != 0 {
		t.Errorf("the log holds %d records after everything was made durable", p.Records)
	}
	if w.counts().maxInFlight < 2 {
		t.Errorf("at most %d APPLY in flight at once, want several (window 4)", w.counts().maxInFlight)
	}
	st := o.Status()
	if st.Waiting != 0 || st.WaitingBytes != 0 || !st.Oldest.IsZero() || st.LogBytes != 0 || st.Applied != 10000 || st.Durable != 10000 {
		t.Errorf("status after the drain: %+v", st)
	}
	// 99 multiples of 101 conflict; the multiples of 97 that are not are refused.
	if st.Conflicts != 99 || st.Failed != 99+103-1 {
		t.Errorf("status counts %d failed, %d conflicts; want 201 and 99", st.Failed, st.Conflicts)
	}
	t.Logf("%d APPLY calls, at most %d in flight", w.counts().calls, w.counts().maxInFlight)
}

// Requests and replies lost and replies cut short at random points: every op still reaches
// the owner once, in order, and OnResult sees each once, in order.
func TestFaultsExactlyOnceInOrder(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			w := newOwner()
			w.rng = rand.New(rand.NewPCG(seed, 20))
			w.pLostBefore, w.pLostAfter, w.pPartial = 0.05, 0.05, 0.1
			w.delay = time.Millisecond
			w.gapWait = 20 * time.Millisecond
			var got results
			o := openT(t, Options{Dir: t.TempDir(), MaxBatchBytes: 1 << 10, SyncBytes: 8 << 10, SyncAfter: time.Hour, OnResult: got.add})
			o.backoffMin, o.backoffMax = time.Millisecond, 4*time.Millisecond
			run(t, o, w)
			var a adder
			a.addFrom(t, o, 2, 1500, "f")
			if err := o.Sync(timeout(t), o.Last()); err != nil {
				t.Fatal(err)
			}
			want := a.all()
			w.check(t, want, false)
			got.check(t, 1, uint64(len(want)), want)
			if w.counts().skipped == 0 {
				t.Error("no op was sent again after a lost reply")
			}
			if o.log.Pending().Records != 0 {
				t.Errorf("the log holds %d records after the final Sync", o.log.Pending().Records)
			}
			t.Logf("%d calls, %d ops skipped as already applied, %d syncs", w.counts().calls, w.counts().skipped, w.counts().syncs)
		})
	}
}

// A restart of the mount, closed or killed: the journal goes on under its ID; nothing is lost
// or applied twice; the ops the owner applied but had not made durable are sent again and
// skipped by it.
func TestRestart(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "close", true: "kill"}[kill], func(t *testing.T) {
			dir := t.TempDir()
			w := newOwner()
			opts := Options{Dir: dir, MaxBatchBytes: 2 << 10, SyncAfter: time.Hour, Logger: quiet}
			o1, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			stop := run(t, o1, w)
			var a adder
			a.addFrom(t, o1, 2, 150, "a")
			ctx := timeout(t)
			if err := o1.Sync(ctx, 300); err != nil {
				t.Fatal(err)
			}
			a.addFrom(t, o1, 2, 150, "b")
			if err := o1.WaitApplied(ctx, 600); err != nil {
				t.Fatal(err)
			}
			if err := stop(); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run after its ctx ended: %v", err)
			}
			if kill {
				// The files stay open and nothing more is written, as after kill -9.
				t.Cleanup(func() { o1.log.Close() })
			} else if err := o1.Close(); err != nil {
				t.Fatal(err)
			}
			if _, durable := w.marks(); durable != 300 {
				t.Fatalf("the owner made %d ops durable, want 300", durable)
			}

			var got results
			opts.OnResult = got.add
			o2 := openT(t, opts)
			if o2.Journal() != o1.Journal() {
				t.Fatalf("journal %v reopened as %v", o1.Journal(), o2.Journal())
			}
			if st := o2.Status(); st.Last != 600 || st.Durable != 300 || st.Waiting != 300 {
				t.Fatalf("reopened: %+v", st)
			}
			run(t, o2, w)
			a.addFrom(t, o2, 2, 200, "c")
			if err := o2.Sync(ctx, o2.Last()); err != nil {
				t.Fatal(err)
			}
			want := a.all()
			w.check(t, want, false)
			got.check(t, 301, 1000, want)
			if w.counts().skipped != 300 {
				t.Errorf("the owner skipped %d ops sent again, want the 300 applied but not durable", w.counts().skipped)
			}
		})
	}
}

// An owner's power cut loses what it had not made durable: its Applied goes back, and the
// mount sends those ops again.
func TestOwnerPowerCut(t *testing.T) {
	w := newOwner()
	w.gapWait = 20 * time.Millisecond
	var got results
	o := openT(t, Options{Dir: t.TempDir(), MaxBatchBytes: 1 << 10, SyncAfter: time.Hour, OnResult: got.add})
	run(t, o, w)
	var a adder
	ctx := timeout(t)
	a.addFrom(t, o, 1, 100, "a")
	if err := o.Sync(ctx, 100); err != nil {
		t.Fatal(err)
	}
	a.addFrom(t, o, 1, 100, "b")
	if err := o.WaitApplied(ctx, 200); err != nil {
		t.Fatal(err)
	}
	w.powerCut()
	a.addFrom(t, o, 1, 100, "c")
	if err := o.Sync(ctx, 300); err != nil {
		t.Fatal(err)
	}
	want := a.all()
	w.check(t, want, true)
	got.check(t, 1, 300, want)
}

// Sync returns once the owner's durable mark covers the op, and the log is trimmed; with
// nothing left to send it asks with an APPLY of no ops.
func TestSync(t *testing.T) {
	w := newOwner()
	w.delay = 20 * time.Millisecond
	o := openT(t, Options{Dir: t.TempDir(), MaxBatchBytes: 512, SyncAfter: time.Hour})
	run(t, o, w)
	var a adder
	a.addFrom(t, o, 1, 40, "s")
	ctx := timeout(t)
	if err := o.Sync(ctx, 40); err != nil {
		t.Fatal(err)
	}
	if _, durable := w.marks(); durable != 40 {
		t.Fatalf("Sync(40) returned with the owner durable up to %d", durable)
	}
	if st := o.Status(); st.Durable != 40 || o.log.Acked() != 40 || o.log.Pending().Records != 0 {
		t.Fatalf("after Sync(40): status durable %d, log acknowledged up to %d", st.Durable, o.log.Acked())
	}
	a.addFrom(t, o, 1, 60, "t")
	if err := o.WaitApplied(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if _, durable := w.marks(); durable != 40 {
		t.Fatalf("the owner made ops durable unasked (up to %d)", durable)
	}
	if p := o.log.Pending(); p.Records != 60 {
		t.Fatalf("the log holds %d records, want the 60 not durable", p.Records)
	}
	before := w.counts().emptySyncs
	if err := o.Sync(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if _, durable := w.marks(); durable != 100 {
		t.Fatalf("Sync(100) returned with the owner durable up to %d", durable)
	}
	if w.counts().emptySyncs != before+1 {
		t.Errorf("%d APPLY of no ops asked for durability, want 1", w.counts().emptySyncs-before)
	}
	if p := o.log.Pending(); p.Records != 0 || p.Bytes != 0 {
		t.Errorf("the log holds %+v after everything was made durable", p)
	}
	if err := o.Sync(ctx, 101); err == nil {
		t.Error("Sync of an op never added returned nil")
	}
}

// With no Sync, the owner is asked for durability SyncAfter after the last op, and every
// SyncBytes of ops sent.
func TestSyncByItself(t *testing.T) {
	t.Run("after", func(t *testing.T) {
		w := newOwner()
		o := openT(t, Options{Dir: t.TempDir(), SyncAfter: 50 * time.Millisecond})
		run(t, o, w)
		var a adder
		a.addFrom(t, o, 1, 50, "i")
		deadline := time.Now().Add(10 * time.Second)
		for o.log.Pending().Records != 0 {
			if time.Now().After(deadline) {
				applied, durable := w.marks()
				t.Fatalf("SyncAfter passed long ago: owner applied %d, durable %d; log holds %+v", applied, durable, o.log.Pending())
			}
			time.Sleep(5 * time.Millisecond)
		}
		if _, durable := w.marks(); durable != 50 {
			t.Fatalf("owner durable up to %d, want 50", durable)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		w := newOwner()
		o := openT(t, Options{Dir: t.TempDir(), MaxBatchBytes: 1 << 10, SyncBytes: 4 << 10, SyncAfter: time.Hour})
		run(t, o, w)
		for i := range 200 {
			if _, err := o.Add(writeOp(fmt.Sprintf("%0100d", i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := o.WaitApplied(timeout(t), 200); err != nil {
			t.Fatal(err)
		}
		// 200 ops of about 106 bytes: 21 KiB, a request for durability every 4 KiB.
		if w.counts().syncs < 4 {
			t.Errorf("%d APPLY asked for durability over 21 KiB of ops, want one per 4 KiB", w.counts().syncs)
		}
	})
}

// Offline: sends fail, Status says so, Add goes on; once the owner is back, Kick sends at
// once (the backoff here would last an hour) and everything drains.
func TestOfflineThenKick(t *testing.T) {
	w := newOwner()
	w.offline = true
	o := openT(t, Options{Dir: t.TempDir(), SyncAfter: time.Hour})
	o.backoffMin, o.backoffMax = time.Hour, time.Hour
	run(t, o, w)
	var a adder
	a.addFrom(t, o, 1, 20, "o")
	deadline := time.Now().Add(10 * time.Second)
	for o.Status().Online {
		if time.Now().After(deadline) {
			t.Fatal("still online after sends failed")
		}
		time.Sleep(time.Millisecond)
	}
	a.addFrom(t, o, 1, 10, "p")
	st := o.Status()
	if !errors.Is(st.LastError, errOffline) || st.LastErrorAt.IsZero() {
		t.Errorf("LastError %v at %v, want the send's error", st.LastError, st.LastErrorAt)
	}
	if st.Waiting != 30 || st.WaitingBytes != int64(30*(wal.RecordHeaderLen+2+4+len("o0-00000"))) || st.Oldest.IsZero() || st.Applied != 0 {
		t.Errorf("status offline: %+v", st)
	}
	w.set(func(w *owner) { w.offline = false })
	o.Kick()
	if err := o.WaitApplied(timeout(t), 30); err != nil {
		t.Fatal(err)
	}
	w.check(t, a.all(), false)
	if st := o.Status(); !st.Online || st.Waiting != 0 {
		t.Errorf("status once drained: %+v", st)
	}
}

// An owner that refuses every batch (a share made read-only) is online and the reason is in
// LastError; once it takes them again, they drain.
func TestOwnerRefuses(t *testing.T) {
	w := newOwner()
	w.refuse = wire.EROFS
	o := openT(t, Options{Dir: t.TempDir(), SyncAfter: time.Hour})
	o.backoffMin, o.backoffMax = time.Millisecond, time.Millisecond
	run(t, o, w)
	var a adder
	a.addFrom(t, o, 1, 5, "r")
	deadline := time.Now().Add(10 * time.Second)
	for !errors.Is(o.Status().LastError, wire.EROFS) {
		if time.Now().After(deadline) {
			t.Fatalf("status after refusals: %+v", o.Status())
		}
		time.Sleep(time.Millisecond)
	}
	if st := o.Status(); !st.Online || st.Waiting != 5 {
		t.Errorf("status while the owner refuses: %+v", st)
	}
	w.set(func(w *owner) { w.refuse = 0 })
	if err := o.WaitApplied(timeout(t), 5); err != nil {
		t.Fatal(err)
	}
	w.check(t, a.all(), false)
}

// WaitApplied and Sync return only once OnResult has had the op's result, even when a reply's
// marks run ahead of its results (the owner applied later batches before it answered).
func TestWaitersSeeResults(t *testing.T) {
	w := newOwner()
	w.lateMarks = 5 * time.Millisecond
	var got results
	o := openT(t, Options{Dir: t.TempDir(), MaxBatchBytes: 256, SyncAfter: time.Hour, OnResult: got.add})
	var a adder
	a.addFrom(t, o, 1, 1000, "w")
	run(t, o, w)
	ctx := timeout(t)
	seen := func() uint64 {
		got.mu.Lock()
		defer got.mu.Unlock()
		return uint64(len(got.seqs))
	}
	for seq := uint64(1); seq <= 1000; seq += 7 {
		wait := o.WaitApplied
		if seq%2 == 0 {
			wait = o.Sync
		}
		if err := wait(ctx, seq); err != nil {
			t.Fatal(err)
		}
		if n := seen(); n < seq {
			t.Fatalf("a wait for op %d returned when OnResult had seen %d ops", seq, n)
		}
	}
}

// Past the log's budget Add returns ErrFull, which is wal.ErrFull too; once the owner has
// made the ops durable there is room again.
func TestErrFull(t *testing.T) {
	o := openT(t, Options{Dir: t.TempDir(), Log: wal.Options{BudgetBytes: 2000}, SyncAfter: time.Hour})
	body := strings.Repeat("x", 100)
	n := 0
	var err error
	for ; n < 100; n++ {
		if _, err = o.Add(writeOp(body)); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrFull) || !errors.Is(err, wal.ErrFull) {
		t.Fatalf("Add %d into a 2000-byte budget: %v, want ErrFull", n+1, err)
	}
	if n != 2000/(wal.RecordHeaderLen+6+100) {
		t.Errorf("%d ops of 130 bytes went into a 2000-byte budget", n)
	}
	if _, err := o.AddBatch([]wire.ApplyOp{writeOp("a"), writeOp("b")}); !errors.Is(err, ErrFull) {
		t.Errorf("AddBatch when full: %v", err)
	}
	w := newOwner()
	run(t, o, w)
	if err := o.Sync(timeout(t), o.Last()); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Add(writeOp(body)); err != nil {
		t.Fatalf("Add once the log was trimmed: %v", err)
	}
}

// An owner that predates APPLY stops Run with ErrUnsupported, in Status, and for waiters.
func TestUnsupported(t *testing.T) {
	w := newOwner()
	w.unsupported = true
	o := openT(t, Options{Dir: t.TempDir()})
	seq, err := o.Add(writeOp("u"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- o.Run(context.Background(), w) }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run goes on against an owner that answers UNSUPPORTED")
	}
	if !errors.Is(err, ErrUnsupported) || !errors.Is(err, wire.ErrnoUnsupported) {
		t.Fatalf("Run: %v, want ErrUnsupported", err)
	}
	if st := o.Status(); !errors.Is(st.LastError, ErrUnsupported) {
		t.Errorf("status LastError %v", st.LastError)
	}
	if err := o.WaitApplied(timeout(t), seq); !errors.Is(err, ErrUnsupported) {
		t.Errorf("WaitApplied after Run stopped: %v", err)
	}
}

// An owner that has applied more of the journal than this log ever held: the log was
// replaced; Run stops rather than have new ops skipped.
func TestOwnerAheadOfLog(t *testing.T) {
	w := newOwner()
	o := openT(t, Options{Dir: t.TempDir()})
	w.applied, w.durable = 50, 50
	w.state = make([]string, 50)
	o.Add(writeOp("new"))
	err := o.Run(timeout(t), w)
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), o.opts.Dir) {
		t.Fatalf("Run: %v, want ErrDamaged naming the directory", err)
	}
	if err := o.Run(timeout(t), w); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Run again: %v", err)
	}
}

// Open refuses a journal whose log is missing or damaged, or a log without its ID, with an
// error that names the directory to move aside, and deletes nothing.
func TestOpenRefusesDamage(t *testing.T) {
	setup := func(t *testing.T) string {
		dir := t.TempDir()
		o, err := Open(Options{Dir: dir, Log: wal.Options{SegmentBytes: 1}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			o.Add(writeOp(fmt.Sprint("op", i)))
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	cases := map[string]func(t *testing.T, dir string){
		"log missing": func(t *testing.T, dir string) { os.RemoveAll(filepath.Join(dir, walName)) },
		"ID missing":  func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, journalName)) },
		"ID short":    func(t *testing.T, dir string) { os.WriteFile(filepath.Join(dir, journalName), []byte("short"), 0o600) },
		"log damaged": func(t *testing.T, dir string) {
			seg := filepath.Join(dir, walName, "0000000000000002.wal")
			b, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)-1] ^= 0xff
			os.WriteFile(seg, b, 0o600)
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir := setup(t)
			damage(t, dir)
			before := files(t, dir)
			_, err := Open(Options{Dir: dir})
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("Open: %v, want ErrDamaged naming %s", err, dir)
			}
			if after := files(t, dir); after != before {
				t.Errorf("files changed: %s -> %s", before, after)
			}
		})
	}
	t.Run("intact", func(t *testing.T) {
		o := openT(t, Options{Dir: setup(t)})
		if o.Last() != 5 || o.Status().Waiting != 5 {
			t.Fatalf("reopened: %+v", o.Status())
		}
	})
}

func files(t *testing.T, dir string) string {
	var names []string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		names = append(names, strings.TrimPrefix(path, dir))
		return nil
	})
	return strings.Join(names, " ")
}

// Add refuses what the owner could not take and logs nothing; the longest body it accepts is
// the longest ApplyOp.Decode accepts.
func TestAddRefuses(t *testing.T) {
	o := openT(t, Options{Dir: t.TempDir()})
	long := wire.ApplyOp{Op: wire.OpWrite, Body: make([]byte, maxOpBody+1)}
	bad := []wire.ApplyOp{{Op: wire.OpRead}, {Op: wire.OpWrite, Flags: 0x80}, long}
	for _, op := range bad {
		if _, err := o.Add(op); err == nil {
			t.Errorf("Add of op %v flags %#x, %d bytes: accepted", op.Op, op.Flags, len(op.Body))
		}
	}
	if _, err := o.AddBatch([]wire.ApplyOp{writeOp("fine"), bad[0]}); err == nil {
		t.Error("AddBatch with a bad op accepted")
	}
	if o.Last() != 0 {
		t.Fatalf("%d ops logged", o.Last())
	}
	var back wire.ApplyOp
	if err := back.Decode(long.AppendTo(nil)); err == nil {
		t.Error("ApplyOp.Decode takes a body longer than maxOpBody: raise maxOpBody")
	}
	long.Body = long.Body[:maxOpBody]
	if err := back.Decode(long.AppendTo(nil)); err != nil {
		t.Errorf("ApplyOp.Decode refuses a body of maxOpBody: %v", err)
	}
	if _, err := o.Add(long); err != nil {
		t.Fatalf("Add of the longest op: %v", err)
	}
}

// senderFunc is a Sender made of a function.
type senderFunc func(ctx context.Context, req wire.ApplyReq) (wire.ApplyResp, error)

func (f senderFunc) Apply(ctx context.Context, req wire.ApplyReq) (wire.ApplyResp, error) {
	return f(ctx, req)
}

// Every op the owner receives is durable in the mount's log first: a power cut of the mount
// cannot take back an op the owner holds (its seq would be given to another op).
func TestLogDurableBeforeSend(t *testing.T) {
	w := newOwner()
	o := openT(t, Options{Dir: t.TempDir(), MaxBatchBytes: 256, SyncAfter: time.Hour})
	var synced atomic.Uint64
	var syncs atomic.Int32
	o.syncLog = func() error {
		upTo := o.Last()
		err := o.log.Sync()
		synced.Store(upTo)
		syncs.Add(1)
		return err
	}
	var early atomic.Int32
	run(t, o, senderFunc(func(ctx context.Context, req wire.ApplyReq) (wire.ApplyResp, error) {
		if last := req.First + uint64(len(req.Ops)) - 1; len(req.Ops) > 0 && last > synced.Load() {
			early.Add(1)
		}
		return w.Apply(ctx, req)
	}))
	var a adder
	a.addFrom(t, o, 2, 500, "d")
	if err := o.WaitApplied(timeout(t), o.Last()); err != nil {
		t.Fatal(err)
	}
	if n := early.Load(); n > 0 {
		t.Fatalf("%d APPLY carried ops not yet durable in the mount's log", n)
	}
	t.Logf("%d log syncs for %d APPLY", syncs.Load(), w.counts().calls)
}

// An op of the largest body goes in an APPLY alone, and a MaxBatchBytes past the frame limit
// is cut to it: every APPLY fits one frame.
func TestLargeOpsFitFrames(t *testing.T) {
	for _, maxBatch := range []int{0, 4 << 20} {
		t.Run(fmt.Sprint(maxBatch), func(t *testing.T) {
			w := newOwner()
			o := openT(t, Options{Dir: t.TempDir(), MaxBatchBytes: maxBatch})
			var want []string
			for i := range 12 {
				size := 10
				switch {
				case i%4 == 3:
					size = maxOpBody
				case i%4 == 2:
					size = 600 << 10
				}
				body := strings.Repeat(string(rune('a'+i)), size)
				if _, err := o.Add(writeOp(body)); err != nil {
					t.Fatal(err)
				}
				want = append(want, body)
			}
			run(t, o, w)
			if err := o.WaitApplied(timeout(t), o.Last()); err != nil {
				t.Fatal(err)
			}
			w.check(t, want, false)
		})
	}
}

// Run stopped by its ctx mid-drain and started again goes on where the owner is; Close ends a
// Run with ErrClosed, and Run after Close refuses.
func TestRunAgainAndClose(t *testing.T) {
	w := newOwner()
	w.delay = 2 * time.Millisecond
	var got results
	o, err := Open(Options{Dir: t.TempDir(), MaxBatchBytes: 256, SyncAfter: time.Hour, Logger: quiet, OnResult: got.add})
	if err != nil {
		t.Fatal(err)
	}
	var a adder
	a.addFrom(t, o, 1, 500, "x")
	stop := run(t, o, w)
	ctx := timeout(t)
	if err := o.WaitApplied(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- o.Run(context.Background(), w) }()
	if err := o.Sync(ctx, 500); err != nil {
		t.Fatal(err)
	}
	want := a.all()
	w.check(t, want, false)
	got.check(t, 1, 500, want)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("Run when closed: %v, want ErrClosed", err)
	}
	if err := o.Run(ctx, w); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	if _, err := o.Add(writeOp("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("Add after Close: %v", err)
	}
}

// A failed fsync of the log stops Run for good: the kernel may have dropped the pages, and a
// later fsync would report success.
func TestLogSyncFails(t *testing.T) {
	w := newOwner()
	o := openT(t, Options{Dir: t.TempDir()})
	eio := errors.New("input/output error")
	o.syncLog = func() error { return eio }
	o.Add(writeOp("a"))
	err := o.Run(timeout(t), w)
	if !errors.Is(err, ErrDamaged) || !errors.Is(err, eio) {
		t.Fatalf("Run: %v", err)
	}
	if n := w.counts().calls; n != 0 {
		t.Errorf("%d APPLY sent after the log failed to sync", n)
	}
	if err := o.Run(timeout(t), w); !errors.Is(err, ErrDamaged) {
		t.Errorf("Run again: %v", err)
	}
}
