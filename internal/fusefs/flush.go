package fusefs

// Sending a file's written data to the owner: at close, fsync, a truncate or rename, the
// flush timer, or in the background past writeBehind dirty bytes (Handle.Write).

import (
	"bytes"
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/peerfs/peerfs/internal/wire"
	"github.com/peerfs/peerfs/internal/writeback"
)

// writeBehind sends full pieces in the background while the application keeps writing (seed
// 001: the link and the owner's disk work while the writer fills the next pieces), until
// less than writeBehind is dirty. Its error is kept for the application's next write, fsync
// or close, like any background flush's.
func (n *Node) writeBehind() {
	f := n.fileOf()
	for {
		errno := n.flushWith(context.Background(), true)
		if errno != 0 {
			f.wb.Fail(errno)
		}
		n.mu.Lock()
		if errno != 0 || f.wb.Full() < writeBehind {
			f.behind = false
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
	}
}

// timedFlush sends what is still dirty flushDelay after a write. Its error is kept for the
// application's next write, fsync or close, like any background flush's.
func (n *Node) timedFlush() {
	f := n.fileOf()
	n.mu.Lock()
	f.timerArmed = false
	n.mu.Unlock()
	if f.wb.Dirty() == 0 {
		return
	}
	if errno := n.flush(context.Background()); errno != 0 {
		f.wb.Fail(errno)
	}
}

// flush sends the node's pending writes and refreshes its attributes from the owner's reply.
func (n *Node) flush(ctx context.Context) syscall.Errno { return n.flushWith(ctx, false) }

// flushWith sends the file's dirty data, or only its full pieces (fullOnly), and records the
// owner's view of the file after the last write.
func (n *Node) flushWith(ctx context.Context, fullOnly bool) syscall.Errno {
	f := n.file.Load()
	if f == nil {
		return 0 // never opened nor written here: nothing to send
	}
	n.flushStart()
	defer n.flushDone()
	// One flush at a time (the write-behind one, a close's, the timer's): each must read
	// the file's state from the replica after the previous one recorded its result, or its
	// first WRITE would find a state it does not know and take it for a change elsewhere.
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	if err := n.createError(); err != nil {
		f.wb.Truncate(0) // never to be sent: the name may be someone else's file now
		return toErrno(err)
	}
	p, done := n.holdPath()
	defer done()
	run := n.newFlushRun(p)
	o := writeback.FlushOptions{Piece: n.root.opts.Piece, InFlight: n.root.opts.WritesInFlight, FullOnly: fullOnly}
	if run.created {
		o.First = run.send // it creates the file on the owner; the others follow once it is there
	}
	err := f.wb.Flush(ctx, o, run.send)
	if n.createLost.Load() {
		f.wb.Truncate(0)
	}
	if err == nil && !fullOnly {
		// Nothing written at all (an empty new file): the close still creates it.
		if errno := n.ensureCreated(ctx); errno != 0 {
			return errno
		}
	}
	run.record(err == nil)
	return toErrno(err)
}

// flushRun is one flush's account of its WRITEs, whose replies arrive in any order.
type flushRun struct {
	n       *Node
	p       string
	before  wire.Entry // the file as the replica knew it when the flush began
	known   bool
	created bool // the file exists only here so far: the first WRITE creates it (create.go)
	// keep says the file was empty when the flush began (created or truncated here) and the
	// WRITEs so far fit within the mount's inline size: a flush that writes it whole leaves
	// it in the replica with its contents, so reading it back (git checks out the objects it
	// just wrote, a linker reads the objects a compiler wrote) costs no round trip.
	keep bool

	mu      sync.Mutex
	last    wire.Entry       // the latest state a reply reported
	pres    []wire.FileState // the file's state before each WRITE
	posts   []wire.Entry     // and after
	kept    []written        // what was written, while keep holds
	covered int64            // bytes in kept
	// States this flush's WRITEs found the file in or left it in, starting from the one the
	// replica knew: a WRITE that found one of them left an echo (wroteState). Replies that
	// found an unknown state wait in unchained until the state they found shows up.
	chained   map[wire.FileState]bool
	unchained []wire.ChangeResp
}

type written struct {
	off  int64
	data []byte
}

func (n *Node) newFlushRun(p string) *flushRun {
	r := &flushRun{n: n, p: p, chained: map[wire.FileState]bool{}}
	r.before, r.known = n.root.replica.Stat(p)
	if local, created := n.localEntry(); created {
		r.before, r.known, r.created = local, true, true
	}
	r.keep = r.known && r.before.IsRegular() && r.before.Size == 0 && n.root.opts.Inline > 0
	if r.known && r.before.IsRegular() {
		r.chained[r.before.State()] = true
	}
	return r
}

// send is the flush's writeback.SendFunc: one WRITE (or the CREATE that carries the first
// data), and its reply accounted for.
func (r *flushRun) send(ctx context.Context, off int64, data []byte) error {
	n := r.n
	n.root.stats.send.Add(int64(len(data)))
	n.root.changeAsked()
	resp, err := n.writePiece(ctx, r.p, off, data)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Pieces complete in any order: the reply with the latest ctime is the file as it now is
	// (with equal ctimes, from a filesystem with coarse timestamps, the largest).
	e := &resp.Entry
	if e.CtimeNs > r.last.CtimeNs || e.CtimeNs == r.last.CtimeNs && e.Size >= r.last.Size {
		r.last = *e
	}
	r.pres = append(r.pres, resp.Pre)
	r.posts = append(r.posts, *e)
	r.unchained = n.chainEchoes(r.chained, append(r.unchained, resp))
	if r.keep && off+int64(len(data)) <= int64(n.root.opts.Inline) {
		r.kept = append(r.kept, written{off, bytes.Clone(data)})
		r.covered += int64(len(data))
	} else {
		r.keep = false
	}
	return nil
}

// record tells the page state and the replica what the flush left the file as, once its
// WRITEs are done; ok says they all succeeded.
func (r *flushRun) record(ok bool) {
	if r.last.Mode == 0 {
		return // nothing reached the owner
	}
	n, last := r.n, r.last
	n.root.forgetContent(r.p)
	foreign := n.flushed(r.known, &r.before, r.pres, r.posts, &last)
	// The pieces never overlap, so bytes written that add up to the size cover it all.
	if r.keep && ok && !foreign && r.covered == int64(last.Size) && last.Size > 0 {
		last.Data = make([]byte, last.Size)
		for _, w := range r.kept {
			copy(last.Data[w.off:], w.data)
		}
		last.HasData = true
	}
	n.root.replica.Put(r.p, last)
}

// chainEchoes records as echoes the states left by the WRITE replies in pending that found
// the file in a chained state (which chains their own), until none does, and returns the rest.
func (n *Node) chainEchoes(chained map[wire.FileState]bool, pending []wire.ChangeResp) []wire.ChangeResp {
	for progress := true; progress; {
		progress = false
		for i := 0; i < len(pending); i++ {
			if r := &pending[i]; chained[r.Pre] {
				chained[r.Entry.State()] = true
				n.wroteState(&r.Entry)
				pending = append(pending[:i], pending[i+1:]...)
				progress = true
				i--
			}
		}
	}
	return pending
}

var _ = (fs.NodeFsyncer)((*Node)(nil))

// Fsync of a file goes to its handle. Fsync of a directory (FSYNCDIR: go-fuse's directory
// streams have no fsync of their own and pass it to the node) means what it means on a local
// disk, that the directory's entries are stable: git, sqlite and PostgreSQL fsync a directory
// after creating or renaming a file in it. Files created in it that exist only in this mount
// so far are created on the owner first (create.go); then the owner fsyncs the directory.
func (n *Node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := f.(fs.FileFsyncer); ok {
		return h.Fsync(ctx, flags)
	}
	n.root.stats.fsync.Add(0)
	if n.IsDir() && n.localKids.Load() > 0 {
		for _, c := range n.Children() {
			if cn, ok := c.Operations().(*Node); ok {
				if _, local := cn.localEntry(); local {
					if errno := cn.flush(ctx); errno != 0 {
						return errno
					}
				}
			}
		}
	}
	if !n.IsDir() {
		if errno := n.flush(ctx); errno != 0 {
			return errno
		}
	}
	p, done := n.holdPath()
	defer done()
	n.root.stats.roundTrips.Add(1)
	errno := toErrno(n.root.owner.Fsync(ctx, p, flags&1 != 0))
	if errno == syscall.EROFS && n.root.journal == nil {
		return 0 // a read-only share holds nothing of this mount's to make stable
	}
	return errno
}
