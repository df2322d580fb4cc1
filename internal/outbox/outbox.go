// Package outbox is a mount's journal of changes to one share, and its sender. Each change (a
// wire.ApplyOp: the body of a MKDIR, CREATE, WRITE, RENAME...) is recorded in a write-ahead
// log (internal/wal) and Add returns; Run sends the log to the owner in order with APPLY
// (PROTOCOL.md), many ops per batch and several batches in flight, delivers each op's result
// to the caller, and frees the log once the owner has made it durable. It knows no FUSE and no
// link: a Sender (remote.Share) carries its batches, and what a result means (a failure to
// report at the next fsync, a conflict to keep beside) is the caller's, through OnResult.
//
// # Files
//
// In the directory the caller gives, one per mount of a share:
//
//	journal  the journal's ID (wire.JournalID), 16 random bytes, written once when the
//	         journal starts (a temporary file, fsync, rename, fsync of the directory)
//	wal/     the log: one record per op, in wire.ApplyOp's own encoding (AppendTo)
//
// The ID and the log belong together: the owner keeps, per journal ID, the last op it applied,
// and skips ops at or below it. So Open refuses a log without its ID, an ID without its log,
// and a damaged log (ErrDamaged), rather than start a new log under an old ID, whose ops the
// owner would skip as already applied.
//
// # What is durable when
//
// Add returns once the op is in the log (write(2), no fsync): it survives kill -9 of the
// daemon, not a power cut. Before a batch is sent, the log is fsynced up to its last op, so the
// owner never holds an op that a power cut of the mount could take back (its seq would then
// be handed out again for another op, which the owner would skip). Records stay in the log
// until the owner says they are durable (the Durable mark of its replies), which it does when
// asked (Sync, SyncAfter, SyncBytes); then the log is acknowledged up to there and trimmed.
// The log is acknowledged up to the last op both durable on the owner and answered here, so
// after a restart of the mount the sender starts again after it: the ops the owner had
// applied but not made durable are sent again and skipped by the owner, answered with empty
// bodies. After a power cut of the owner, it has lost what it had not made
// durable, says so with a lower Applied, and gets those ops again.
package outbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peerfs/peerfs/internal/rootfs"
	"github.com/peerfs/peerfs/internal/wal"
	"github.com/peerfs/peerfs/internal/wire"
)

// Sender carries one APPLY to the owner and returns its reply, or an error once ctx ends.
// remote.Share is one.
type Sender interface {
	Apply(ctx context.Context, req wire.ApplyReq) (wire.ApplyResp, error)
}

// Defaults of Options.
const (
	// DefaultWindow batches in flight: at 50 ms round trip and 768 KiB per batch, 4 keep
	// 60 MiB/s going, past what a WAN link to a home gives.
	DefaultWindow = 4
	// DefaultMaxBatchBytes of encoded ops per APPLY: under wire.MaxFrameLen with room for a
	// request head, and a reply of results that fits one frame too.
	DefaultMaxBatchBytes = 768 << 10
	// DefaultSyncAfter an idle moment after the last op, the owner is asked for durability so
	// the log can be trimmed.
	DefaultSyncAfter = 2 * time.Second
	// DefaultSyncBytes of ops sent since the last request for durability make the next batch
	// ask for it: the log holds about this much plus a window beyond what is durable.
	DefaultSyncBytes = 256 << 20
)

// Retry after a failed send: 50 ms, doubling to 2 s; Kick retries at once.
const (
	backoffMin = 50 * time.Millisecond
	backoffMax = 2 * time.Second
)

// maxOpBody is the longest op body wire.ApplyOp.Decode accepts (a WRITE of a full chunk, its
// path and head); an op the owner could not decode is refused by Add, not logged.
const maxOpBody = wire.MaxChunk + wire.MaxPathLen + 64

const (
	journalName = "journal"
	walName     = "wal"
)

// Errors callers branch on.
var (
	// ErrFull: the log holds its budget (Options.Log.BudgetBytes) of ops the owner has not
	// made durable. It wraps wal.ErrFull.
	ErrFull = fmt.Errorf("outbox: the journal is full of changes not yet on the owner: %w", wal.ErrFull)
	// ErrClosed: the Outbox was closed.
	ErrClosed = errors.New("outbox: closed")
	// ErrUnsupported: the owner predates APPLY; changes must go one request each. Run returns
	// it wrapped with the owner's error.
	ErrUnsupported = errors.New("outbox: the owner does not support APPLY")
	// ErrDamaged: the journal's files cannot be trusted (log damaged or missing, ID missing),
	// or the owner has applied ops this log never held. Open and Run return it wrapped with
	// what is wrong and what to do.
	ErrDamaged = errors.New("outbox: journal damaged")
)

// Options configure an Outbox; zero values take the defaults.
type Options struct {
	Dir           string        // the journal's directory (created if missing)
	Log           wal.Options   // the log's segment size and budget
	Window        int           // APPLY batches in flight (DefaultWindow)
	MaxBatchBytes int           // encoded ops per APPLY; a larger op goes alone (DefaultMaxBatchBytes)
	SyncAfter     time.Duration // ask for durability this long after the last op (DefaultSyncAfter)
	SyncBytes     int64         // or every this many bytes of ops sent (DefaultSyncBytes)
	// OnResult receives each op's result once per process, in seq order, from Run's
	// goroutine, before WaitApplied or Sync see the op applied (so what it records is there
	// for whoever waits). It must not wait on the Outbox. Ops sent again after a restart of
	// the mount that the owner had applied get Code 0 and an empty body.
	OnResult func(seq uint64, op wire.ApplyOp, r wire.ApplyResult)
	Logger   *slog.Logger // slog.Default()
}

// Outbox is one mount's journal of one share. Add, WaitApplied, Sync, Status and Kick are
// safe for concurrent use; one Run at a time sends.
type Outbox struct {
	opts Options
	id   wire.JournalID
	log  *wal.Log

	backoffMin, backoffMax time.Duration // fixed at Open; tests shorten them
	syncLog                func() error  // log.Sync; tests watch it

	wake chan struct{} // capacity 1: Add, Sync, Kick and Close nudge Run

	lastAdd    atomic.Int64 // Unix ns of the last Add (of Open before any)
	unanswered atomic.Int64 // bytes in the log of ops without a result in this process

	mu        sync.Mutex
	applied   uint64 // the owner's marks, as its last reply in batch order gave them
	durable   uint64 // (at Open both the log's acknowledged mark)
	answered  uint64 // the last seq given to OnResult (at Open the log's mark)
	wantSync  uint64 // the highest seq a Sync waits to see durable
	kicked    bool
	online    bool
	lastErr   error
	lastErrAt time.Time
	failed    uint64
	conflicts uint64
	stopErr   error // why the last Run ended, when not by its ctx: waiters return it
	broken    error // ErrDamaged found by Run: Run refuses to start again
	running   bool
	stopRun   context.CancelFunc
	runDone   chan struct{}
	closed    bool
	changed   chan struct{} // closed and replaced when the fields above change (notify)
}

// Open opens the journal in opts.Dir, or starts one there.
func Open(opts Options) (*Outbox, error) {
	if opts.Dir == "" {
		return nil, errors.New("outbox: no directory given")
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = DefaultMaxBatchBytes
	}
	// The request head (share name, journal, first, flags, count) is under 128 bytes.
	opts.MaxBatchBytes = min(opts.MaxBatchBytes, wire.MaxFrameLen-128)
	if opts.SyncAfter <= 0 {
		opts.SyncAfter = DefaultSyncAfter
	}
	if opts.SyncBytes <= 0 {
		opts.SyncBytes = DefaultSyncBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Log.Logger == nil {
		opts.Log.Logger = opts.Logger
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, err
	}
	id, err := openJournal(opts.Dir)
	if err != nil {
		return nil, err
	}
	log, err := wal.Open(filepath.Join(opts.Dir, walName), opts.Log)
	if err != nil {
		var ce *wal.CorruptError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("%w: %w", ErrDamaged, err)
		}
		return nil, fmt.Errorf("outbox: opening the journal's log: %w", err)
	}
	acked := log.Acked()
	o := &Outbox{
		opts: opts, id: id, log: log,
		backoffMin: backoffMin, backoffMax: backoffMax, syncLog: log.Sync,
		wake:    make(chan struct{}, 1),
		applied: acked, durable: acked, answered: acked,
		online:  true,
		changed: make(chan struct{}),
	}
	o.lastAdd.Store(time.Now().UnixNano())
	o.unanswered.Store(log.Pending().Bytes)
	return o, nil
}

// openJournal reads the journal's ID in dir, or, when dir holds no journal at all, makes one.
func openJournal(dir string) (wire.JournalID, error) {
	var id wire.JournalID
	path := filepath.Join(dir, journalName)
	walDir := filepath.Join(dir, walName)
	aside := fmt.Sprintf("move the directory %s aside (keep it: it may hold changes that never reached the owner) to start a new journal", dir)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if len(b) != wire.JournalIDLen {
			return id, fmt.Errorf("%w: %s holds %d bytes, not a %d-byte journal ID; %s", ErrDamaged, path, len(b), wire.JournalIDLen, aside)
		}
		if _, err := os.Stat(walDir); errors.Is(err, fs.ErrNotExist) {
			return id, fmt.Errorf("%w: the journal's log %s is missing: the owner would skip new changes as already applied; %s", ErrDamaged, walDir, aside)
		}
		copy(id[:], b)
		return id, nil
	case !errors.Is(err, fs.ErrNotExist):
		return id, fmt.Errorf("outbox: reading the journal's ID: %w", err)
	}
	// No ID: a new journal, unless a log is there without it.
	if names, err := os.ReadDir(walDir); err == nil && len(names) > 0 {
		return id, fmt.Errorf("%w: the log %s is there but its journal ID %s is missing, so its changes cannot be sent; %s", ErrDamaged, walDir, path, aside)
	}
	// The log's directory first: an ID on disk always has its log.
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		return id, err
	}
	if _, err := rand.Read(id[:]); err != nil {
		return id, err
	}
	if err := rootfs.WriteFileAtomic(path, id[:]); err != nil {
		return id, fmt.Errorf("outbox: writing the journal's ID: %w", err)
	}
	return id, nil
}

// Journal returns the journal's ID.
func (o *Outbox) Journal() wire.JournalID { return o.id }

// Last returns the seq of the last op added (0 when none ever was).
func (o *Outbox) Last() uint64 { return o.log.Next() - 1 }

// scratch holds one op's encoding on its way into the log.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// Add records op in the log and returns its seq, once written (write(2)). Past the log's
// budget it returns ErrFull; an op the owner could not take is refused, nothing logged.
func (o *Outbox) Add(op wire.ApplyOp) (uint64, error) {
	if err := check(&op); err != nil {
		return 0, err
	}
	bp := scratch.Get().(*[]byte)
	rec := op.AppendTo((*bp)[:0])
	seq, err := o.log.Append(rec)
	if cap(rec) <= 64<<10 {
		*bp = rec
		scratch.Put(bp)
	}
	if err != nil {
		return 0, o.addErr(err)
	}
	o.added(wal.RecordHeaderLen + int64(len(rec)))
	return seq, nil
}

// AddBatch records ops in the log with one write and returns the seq of the first; the others
// follow one by one. All are recorded or none.
func (o *Outbox) AddBatch(ops []wire.ApplyOp) (uint64, error) {
	n := 0
	for i := range ops {
		if err := check(&ops[i]); err != nil {
			return 0, fmt.Errorf("op %d of %d: %w", i, len(ops), err)
		}
		n += 30 + len(ops[i].Body)
	}
	buf := make([]byte, 0, n)
	recs := make([][]byte, len(ops))
	for i := range ops {
		at := len(buf)
		buf = ops[i].AppendTo(buf)
		recs[i] = buf[at:len(buf):len(buf)]
	}
	first, err := o.log.AppendBatch(recs)
	if err != nil {
		return 0, o.addErr(err)
	}
	o.added(int64(len(ops))*wal.RecordHeaderLen + int64(len(buf)))
	return first, nil
}

func (o *Outbox) addErr(err error) error {
	switch {
	case errors.Is(err, wal.ErrFull):
		return ErrFull
	case errors.Is(err, wal.ErrClosed):
		return ErrClosed
	}
	return fmt.Errorf("outbox: recording a change: %w", err)
}

func (o *Outbox) added(bytes int64) {
	o.unanswered.Add(bytes)
	o.lastAdd.Store(time.Now().UnixNano())
	o.poke()
}

// check refuses what the owner would refuse as malformed.
func check(op *wire.ApplyOp) error {
	switch {
	case !wire.Applicable(op.Op):
		return fmt.Errorf("outbox: %v cannot travel in a journal", op.Op)
	case op.Flags&^wire.ApplyHasBase != 0:
		return fmt.Errorf("outbox: unknown op flags %#x", op.Flags)
	case len(op.Body) > maxOpBody:
		return fmt.Errorf("outbox: %v body of %d bytes, the most is %d", op.Op, len(op.Body), maxOpBody)
	}
	return nil
}

// poke wakes Run if it sleeps.
func (o *Outbox) poke() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// notify wakes the waiters. Called with mu held.
func (o *Outbox) notify() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// Kick has Run retry at once instead of waiting out its backoff: the caller knows the link
// is back.
func (o *Outbox) Kick() {
	o.mu.Lock()
	o.kicked = true
	o.mu.Unlock()
	o.poke()
}

// WaitApplied waits until the owner has applied op seq (its result, if any, went to
// OnResult before), ctx ends, the Outbox closes or Run stops on an error (returned).
func (o *Outbox) WaitApplied(ctx context.Context, seq uint64) error {
	if last := o.Last(); seq > last {
		return fmt.Errorf("outbox: waiting for op %d, but the last added is %d", seq, last)
	}
	// A reply's Applied may cover ops of later batches whose results are still on their
	// way: the op must have its result too.
	return o.wait(ctx, func() bool { return o.applied >= seq && o.answered >= seq })
}

// Sync waits until the owner has made op seq and every op before it durable, asking it to
// (an APPLY with ApplySync: the batch that carries seq, or one with no ops), and their
// results went to OnResult. It returns as WaitApplied does otherwise.
func (o *Outbox) Sync(ctx context.Context, seq uint64) error {
	if last := o.Last(); seq > last {
		return fmt.Errorf("outbox: sync of op %d, but the last added is %d", seq, last)
	}
	o.mu.Lock()
	if seq > o.durable && seq > o.wantSync {
		o.wantSync = seq
		o.poke()
	}
	o.mu.Unlock()
	return o.wait(ctx, func() bool { return o.durable >= seq && o.answered >= seq })
}

// wait waits until done (called with mu held) holds.
func (o *Outbox) wait(ctx context.Context, done func() bool) error {
	for {
		o.mu.Lock()
		switch {
		case done():
			o.mu.Unlock()
			return nil
		case o.closed:
			o.mu.Unlock()
			return ErrClosed
		case o.stopErr != nil:
			err := o.stopErr
			o.mu.Unlock()
			return err
		}
		ch := o.changed
		o.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Status is what a journal holds and how sending it goes.
type Status struct {
	Last    uint64 // the last op added
	Applied uint64 // the last op the owner applied, as far as its replies said
	Durable uint64 // the last op the owner made durable; the log holds the ops after it
	// Waiting ops were added and not yet applied (Last - Applied); WaitingBytes is their size
	// in the log (the ops without a result yet in this process); Oldest is when the first of
	// them was added (zero when none waits).
	Waiting      uint64
	WaitingBytes int64
	Oldest       time.Time
	LogBytes     int64 // the log's bytes of ops not yet durable on the owner, headers included
	// Online: the last exchange with the owner got a reply, be it an error (true before the
	// first). An owner that refuses every batch (a share made read-only) is online, with
	// LastError saying why nothing drains.
	Online bool
	// LastError is the last send that failed, or what stopped Run, at LastErrorAt; it stays
	// after the owner answers again (Online says so).
	LastError   error
	LastErrorAt time.Time
	// Failed results (a non-zero Code) in this process, of which Conflicts (ErrnoConflict).
	Failed    uint64
	Conflicts uint64
}

// Status returns the journal's state now.
func (o *Outbox) Status() Status {
	o.mu.Lock()
	st := Status{
		Applied: o.applied, Durable: o.durable, Online: o.online,
		LastError: o.lastErr, LastErrorAt: o.lastErrAt, Failed: o.failed, Conflicts: o.conflicts,
	}
	o.mu.Unlock()
	st.Last = o.Last()
	if st.Last > st.Applied {
		st.Waiting = st.Last - st.Applied
		if recs, err := o.log.Read(st.Applied+1, 1, 0); err == nil && len(recs) == 1 {
			st.Oldest = recs[0].Time
		}
		st.WaitingBytes = max(o.unanswered.Load(), 0)
	}
	st.LogBytes = o.log.Pending().Bytes
	return st
}

// Close stops Run (which then returns ErrClosed) and closes the log. What it holds stays for
// the next Open.
func (o *Outbox) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return ErrClosed
	}
	o.closed = true
	stop, done := o.stopRun, o.runDone
	running := o.running
	o.notify()
	o.mu.Unlock()
	if running {
		stop()
		<-done
	}
	return o.log.Close()
}
