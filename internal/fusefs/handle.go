package fusefs

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/peerfs/peerfs/internal/cache"
	"github.com/peerfs/peerfs/internal/fetch"
	"github.com/peerfs/peerfs/internal/wire"
	"github.com/peerfs/peerfs/internal/writeback"
)

// Handle is an open file. Reads come from the inline content of a small file or from the
// chunk cache; writes go to the node's writeback extents.
type Handle struct {
	n        *Node
	writable bool
	pass     bool // served by FUSE passthrough
	// passWrite says the kernel writes this open's data into the backing cache file
	// itself: its flushes send the file to the owner (handle_passthrough.go).
	passWrite bool
	// fills says the kernel keeps this open's READ replies in its page cache (not an
	// O_DIRECT open), so they count toward what its pages hold (pages.go).
	fills  bool
	inline []byte // whole content, when the listing carried it and the file is not written
	// wrote is set at the handle's first write, which drops setuid and setgid (killpriv.go).
	wrote atomic.Bool

	mu       sync.Mutex // guards cf and lastEnd
	cf       *cache.File
	released bool
	lastEnd  int64 // end of the previous read: sequential readers get readahead
}

// passHandle is a Handle of a fully cached, clean file served by FUSE passthrough: the kernel
// reads the cache file directly and never calls Read.
type passHandle struct {
	*Handle
	fd int
}

var _ = (fs.FilePassthroughFder)((*passHandle)(nil))

func (p *passHandle) PassthroughFd() (int, bool) { return p.fd, true }

var _ = (fs.NodeOpener)((*Node)(nil))

func (n *Node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n.root.stats.open.Add(0)
	if errno := n.reserveOpen(); errno != 0 {
		return nil, 0, errno
	}
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		// A reader closed just before: an ordinary writer is cheaper than a passthrough one.
		n.passDrained(ctx)
	}
	e, errno := n.opening(ctx, flags)
	if errno != 0 {
		n.unreserveOpen()
		return nil, 0, errno
	}
	return n.openHandle(ctx, flags, &e)
}

// opening returns the attributes of the file being opened, after emptying it for O_TRUNC.
// The open is reserved (reserveOpen).
func (n *Node) opening(ctx context.Context, flags uint32) (wire.Entry, syscall.Errno) {
	f := n.fileOf()
	p, done := n.holdPath()
	defer done()
	e, err := n.entry(ctx)
	if err != nil {
		return e, toErrno(err)
	}
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		if errno := n.ensureCreated(ctx); errno != 0 {
			return e, errno
		}
		f.wb.Truncate(0)
		before, known := n.root.replica.Stat(p)
		n.root.stats.roundTrips.Add(1)
		resp, err := n.root.owner.SetAttr(ctx, wire.SetAttrReq{Path: p, Valid: wire.SetSize})
		if err != nil {
			return e, toErrno(err)
		}
		e = resp.Entry
		n.changedHere(known, &before, resp.Pre, &e, false)
		n.root.replica.Put(p, e)
		n.mu.Lock()
		f.localSize = 0
		n.mu.Unlock()
		n.root.forgetContent(p)
		n.truncatePass(0)
	}
	return e, 0
}

// passDrainWait is how long an open for writing waits for the passthrough opens of its file
// to end before it opens by passthrough too (handle_passthrough.go). close(2) returns before
// the kernel sends RELEASE, so a program that closes a reader and opens the file for writing
// at once would otherwise meet its own reader.
const passDrainWait = 200 * time.Millisecond

// passDrained reports whether the file has no passthrough open, waiting up to passDrainWait
// for the ones there are to be released.
func (n *Node) passDrained(ctx context.Context) bool {
	f := n.fileOf()
	deadline := time.Now().Add(passDrainWait)
	for {
		n.mu.Lock()
		pass := f.passOpens
		n.mu.Unlock()
		if pass == 0 {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openHandle builds the handle for an open of the file described by e. The caller reserved
// the open (reserveOpen); if it fails, openHandle gives the reservation back.
func (n *Node) openHandle(ctx context.Context, flags uint32, e *wire.Entry) (fs.FileHandle, uint32, syscall.Errno) {
	h := &Handle{n: n, writable: flags&syscall.O_ACCMODE != syscall.O_RDONLY, lastEnd: -1,
		fills: flags&openDirect == 0}
	f := n.fileOf()
	n.mu.Lock()
	f.last = *e // the file as the open found it, until a lookup or Getattr sees it again (fill)
	n.mu.Unlock()
	if ph, ok := n.joinPassthrough(h, e); ok {
		return ph, 0, 0
	}
	if h.writable {
		n.mu.Lock()
		f.writers++
		if f.localSize < 0 {
			f.localSize = int64(e.Size)
		}
		n.mu.Unlock()
		return h, 0, 0
	}
	n.mu.Lock()
	pending := f.writers > 0 || f.wb.Dirty() > 0
	n.mu.Unlock()
	if e.HasData && !pending {
		h.inline = e.Data
		n.root.stats.hits.Add(1)
		return h, n.openPages(version(e)), 0
	}
	cf, err := n.root.cache.Get(n.root.key(n.path()), version(e))
	if err != nil {
		n.unreserveOpen()
		return nil, 0, toErrno(err)
	}
	h.cf = cf
	// Pages the kernel holds of the whole file serve it at once (pagesWhole); otherwise a
	// fully cached file is read by passthrough.
	pages := !pending && n.pagesWhole(version(e))
	if !pending && !pages && !cf.Complete() && n.root.passthrough.Load() {
		n.root.fetch.Settle(ctx, n.path(), cf)
	}
	// A fully cached, clean file: the kernel reads the cache file itself (seed 003). The
	// kernel fails an open that would mix passthrough and page-cached opens of one inode, so
	// passthrough is used only when no other open of the file exists, or all are passthrough.
	n.mu.Lock()
	pass := n.root.passthrough.Load() && !pending && cf.Complete() && (n.opens == 1 && !pages || f.passOpens > 0)
	if pass {
		f.passOpens++
		h.pass = true
		if f.passCF == nil {
			f.passCF = cf.Retain()
			f.passSent, _ = stampOf(cf.OSFile())
		}
	}
	n.mu.Unlock()
	if pass {
		n.root.stats.passthrough.Add(1)
		return &passHandle{Handle: h, fd: int(cf.OSFile().Fd())}, 0, 0
	}
	return h, n.openPages(version(e)), 0
}

// version is the cache version of a file with attributes e.
func version(e *wire.Entry) cache.Version { return fetch.VersionOf(e) }

var _ = (fs.FileReader)((*Handle)(nil))

// Read serves from the inline content or the cache, fetching missing chunks first. Data this
// mount wrote and has not sent yet is flushed first, so a reader always sees its own writes.
func (h *Handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f := h.n.fileOf()
	n := h.n
	n.root.stats.read.Add(int64(len(dest)))
	if h.inline != nil {
		if off >= int64(len(h.inline)) {
			return fuse.ReadResultData(nil), 0
		}
		return fuse.ReadResultData(h.inline[off:min(off+int64(len(dest)), int64(len(h.inline)))]), 0
	}
	n.mu.Lock()
	writing := f.writers > 0
	n.mu.Unlock()
	if writing || f.wb.Dirty() > 0 {
		// Also waits for a flush already under way: its data left the dirty set before it
		// reached the owner.
		if errno := n.flush(ctx); errno != 0 {
			return nil, errno
		}
	}
	cf, errno := h.cacheFile(ctx)
	if errno != 0 {
		return nil, errno
	}
	defer func() {
		if cf != nil {
			cf.Release()
		}
	}()
	size := cf.Version().Size
	if off >= size {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), size)
	// The kernel's readahead sends a sequential reader's READs a few at a time and they are
	// served concurrently, so they may arrive out of order: a read that the file's stream is
	// about to bring is sequential too.
	h.mu.Lock()
	sequential := off == 0 || off == h.lastEnd
	h.mu.Unlock()
	if !sequential {
		sequential = n.root.fetch.StreamCovers(n.path(), cf, off)
	}
	h.mu.Lock()
	if sequential {
		h.lastEnd = max(h.lastEnd, end)
	} else {
		h.lastEnd = end
	}
	h.mu.Unlock()
	if !cf.Present(off, end-off) {
		n.root.stats.misses.Add(1)
		ahead := end
		if sequential {
			ahead = min(end+n.root.opts.Readahead, size)
		}
		var err error
		if sequential {
			n.root.stats.streamWaits.Add(1)
			var filled bool
			filled, err = n.root.fetch.ReadSequential(ctx, n.path(), cf, off, ahead, dest[:end-off])
			if err == nil && filled {
				h.served(cf, off, end)
				return fuse.ReadResultData(dest[:end-off]), 0
			}
			if err == nil { // the stream stopped first: tagged READs take over
				err = n.root.fetch.Fetch(ctx, n.path(), cf, off, end, end)
			}
		} else {
			err = n.root.fetch.ReadInto(ctx, n.path(), cf, off, dest[:end-off])
			if err == nil {
				h.served(cf, off, end)
				return fuse.ReadResultData(dest[:end-off]), 0
			}
		}
		if err != nil {
			if !errors.Is(err, fetch.ErrChanged) {
				return nil, n.failed("read", err)
			}
			// The file changed on the owner since this version was cached: start over
			// from its current attributes, once.
			n.root.forgetContent(n.path())
			n.root.replica.Invalidate(n.path())
			cf.Release()
			if cf, errno = h.cacheFile(ctx); errno != 0 {
				cf = nil
				return nil, errno
			}
			size = cf.Version().Size
			if off >= size {
				return fuse.ReadResultData(nil), 0
			}
			end = min(off+int64(len(dest)), size)
			if err := n.root.fetch.Fetch(ctx, n.path(), cf, off, end, end); err != nil {
				return nil, n.failed("read", err)
			}
		}
	} else {
		n.root.stats.hits.Add(1)
		if sequential && end < size && !cf.Present(end, min(n.root.opts.Readahead/2, size-end)) {
			n.root.fetch.ReadAhead(n.path(), cf, end, min(end+n.root.opts.Readahead, size))
		}
	}
	// Copy out under our reference: an fd-backed reply is spliced after we return, when the
	// cache file may already be closed by eviction or a newer version.
	got, err := cf.ReadAt(dest[:end-off], off)
	if err != nil && got < int(end-off) {
		return nil, n.failed("read", err)
	}
	h.served(cf, off, off+int64(got))
	return fuse.ReadResultData(dest[:got]), 0
}

// served records a READ reply of [off, end) of cf's version, which the kernel keeps in its
// page cache unless the open bypasses it.
func (h *Handle) served(cf *cache.File, off, end int64) {
	if h.fills {
		h.n.readPages(cf.Version(), off, end)
	}
}

// cacheFile returns a reference of its own (Release it) to the handle's cache file,
// reopening it when the owner's version changed (a change event marked it stale).
func (h *Handle) cacheFile(ctx context.Context) (*cache.File, syscall.Errno) {
	h.mu.Lock()
	if h.cf != nil && !h.cf.Stale() {
		ref := h.cf.Retain()
		h.mu.Unlock()
		return ref, 0
	}
	h.mu.Unlock()
	e, err := h.n.entry(ctx)
	if err != nil {
		return nil, h.n.failed("open cache", err)
	}
	nf, err := h.n.root.cache.Get(h.n.root.key(h.n.path()), version(&e))
	if err != nil {
		return nil, h.n.failed("open cache", err)
	}
	h.mu.Lock()
	old := h.cf
	h.cf = nf
	ref := nf.Retain()
	h.mu.Unlock()
	if old != nil {
		old.Release()
	}
	return ref, 0
}

var _ = (fs.FileWriter)((*Handle)(nil))

// Write keeps the data in the node's writeback extents; it reaches the owner at flush,
// fsync, close or when too much is pending. An error from an earlier flush is reported here.
func (h *Handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	f := h.n.fileOf()
	n := h.n
	n.root.stats.write.Add(int64(len(data)))
	if err := f.wb.Err(); err != nil {
		return 0, toErrno(err)
	}
	if err := n.createError(); err != nil {
		return 0, toErrno(err)
	}
	if !h.wrote.Load() && !h.wrote.Swap(true) {
		if errno := n.killPrivs(ctx); errno != 0 {
			return 0, errno
		}
	}
	f.wb.Write(data, off)
	n.mu.Lock()
	if end := off + int64(len(data)); end > f.localSize {
		f.localSize = end
	}
	if !f.timerArmed {
		f.timerArmed = true
		if f.flushTimer == nil {
			f.flushTimer = time.AfterFunc(flushDelay, n.timedFlush)
		} else {
			f.flushTimer.Reset(flushDelay)
		}
	}
	dirty := f.wb.Dirty()
	startBehind := dirty >= writeBehind && dirty < dirtyLimit && !f.behind && f.wb.Full() >= writeBehind
	if startBehind {
		f.behind = true
	}
	n.mu.Unlock()
	if startBehind {
		go n.writeBehind()
	}
	if dirty >= dirtyLimit {
		if errno := n.flush(ctx); errno != 0 {
			return 0, errno
		}
	}
	return uint32(len(data)), 0
}

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
	before, known := n.root.replica.Stat(p)
	local, created := n.localEntry() // created here, not on the owner yet (create.go)
	if created {
		before, known = local, true
	}
	// A file that was empty when the flush began (created or truncated here) and that the
	// flush writes whole, small enough to come inline in a listing, stays in the replica with
	// its contents: reading it back (git checks out the objects it just wrote, a linker reads
	// the objects a compiler wrote) costs no round trip.
	inlineMax := int64(n.root.opts.Inline)
	keep := known && before.IsRegular() && before.Size == 0 && inlineMax > 0
	type written struct {
		off  int64
		data []byte
	}
	var (
		mu      sync.Mutex
		last    wire.Entry
		pres    []wire.FileState // the file's state before each WRITE
		posts   []wire.Entry     // and after
		kept    []written
		covered int64
		// States this flush's WRITEs found the file in or left it in, starting from the one
		// the replica knew: a WRITE that found one of them left an echo (wroteState).
		// Replies can arrive out of order; those that found an unknown state wait in
		// unchained until the state they found shows up.
		chained   = map[wire.FileState]bool{}
		unchained []wire.ChangeResp
	)
	if known && before.IsRegular() {
		chained[before.State()] = true
	}
	send := func(ctx context.Context, off int64, data []byte) error {
		n.root.stats.send.Add(int64(len(data)))
		n.root.stats.roundTrips.Add(1)
		resp, err := n.writePiece(ctx, p, off, data)
		if err == nil {
			mu.Lock()
			// Pieces complete in any order: the reply with the latest ctime is the file as it
			// now is (with equal ctimes, from a filesystem with coarse timestamps, the largest).
			e := &resp.Entry
			if e.CtimeNs > last.CtimeNs || e.CtimeNs == last.CtimeNs && e.Size >= last.Size {
				last = *e
			}
			pres = append(pres, resp.Pre)
			posts = append(posts, *e)
			unchained = n.chainEchoes(chained, append(unchained, resp))
			if keep && off+int64(len(data)) <= inlineMax {
				kept = append(kept, written{off, bytes.Clone(data)})
				covered += int64(len(data))
			} else {
				keep = false
			}
			mu.Unlock()
		}
		return err
	}
	o := writeback.FlushOptions{Piece: n.root.opts.Piece, InFlight: n.root.opts.WritesInFlight, FullOnly: fullOnly}
	if created {
		o.First = send // it creates the file on the owner; the others follow once it is there
	}
	err := f.wb.Flush(ctx, o, send)
	if n.createLost.Load() {
		f.wb.Truncate(0)
	}
	if err == nil && !fullOnly {
		// Nothing written at all (an empty new file): the close still creates it.
		if errno := n.ensureCreated(ctx); errno != 0 {
			return errno
		}
	}
	if last.Mode != 0 {
		n.root.forgetContent(p)
		foreign := n.flushed(known, &before, pres, posts, &last)
		// The pieces never overlap, so bytes written that add up to the size cover it all.
		if keep && err == nil && !foreign && covered == int64(last.Size) && last.Size > 0 {
			last.Data = make([]byte, last.Size)
			for _, w := range kept {
				copy(last.Data[w.off:], w.data)
			}
			last.HasData = true
		}
		n.root.replica.Put(p, last)
	}
	return toErrno(err)
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

var _ = (fs.FileFlusher)((*Handle)(nil))

// Flush runs at every close(2) of a descriptor: close-to-open consistency means the data is
// on the owner when close returns, and a failed write is reported here.
func (h *Handle) Flush(ctx context.Context) syscall.Errno {
	h.n.root.stats.flush.Add(0)
	if !h.writable {
		// A file created here by an open for reading (a lock file) still reaches the owner
		// at its close, as a written one does (create.go).
		return h.n.ensureCreated(ctx)
	}
	if h.passWrite {
		if errno := h.n.sendPassWrites(ctx); errno != 0 {
			return errno
		}
	}
	return h.n.flush(ctx)
}

var _ = (fs.FileFsyncer)((*Handle)(nil))

func (h *Handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	h.n.root.stats.fsync.Add(0)
	if h.passWrite {
		if errno := h.n.sendPassWrites(ctx); errno != 0 {
			return errno
		}
	}
	if errno := h.n.flush(ctx); errno != 0 {
		return errno
	}
	p, done := h.n.holdPath()
	defer done()
	h.n.root.stats.roundTrips.Add(1)
	return toErrno(h.n.root.owner.Fsync(ctx, p, flags&1 != 0))
}

var _ = (fs.FileReleaser)((*Handle)(nil))

// Release runs when the last descriptor of the open is gone; Flush already sent the data.
func (h *Handle) Release(ctx context.Context) syscall.Errno {
	f := h.n.fileOf()
	h.n.root.stats.release.Add(0)
	h.mu.Lock()
	cf := h.cf
	h.cf, h.released = nil, true
	h.mu.Unlock()
	complete := false
	if cf != nil {
		complete = cf.Complete()
		cf.Release()
	}
	var errno syscall.Errno
	if h.passWrite {
		errno = h.n.sendPassWrites(ctx)
	}
	if h.writable {
		if e := h.n.flush(ctx); errno == 0 {
			errno = e
		}
	}
	var passCF *cache.File
	h.n.mu.Lock()
	h.n.opens--
	if h.pass {
		f.passOpens--
		if h.passWrite {
			f.passWriters--
		}
		if f.passOpens == 0 {
			passCF, f.passCF = f.passCF, nil
		}
	}
	if h.writable {
		f.writers--
		if f.writers == 0 && f.wb.Dirty() == 0 {
			f.localSize = -1
		}
	}
	hidden := ""
	if h.n.opens == 0 && h.n.hiddenName() != "" {
		hidden, h.n.renamed.hidden = h.n.renamed.hidden, ""
		h.n.gone = true // an open that raced the unlink starts over (reserveOpen)
	}
	h.n.mu.Unlock()
	if passCF != nil {
		passCF.Release()
	}
	if complete && !h.pass && h.n.root.passthrough.Load() {
		h.n.idlePages()
	}
	if hidden != "" {
		// The last close of a file unlinked while open: now delete it on the owner.
		h.n.dropAlias()
		if err := h.n.root.owner.Unlink(context.WithoutCancel(ctx), hidden); err != nil {
			h.n.root.log.Warn("could not delete an unlinked file on the owner", "path", hidden, "err", err)
		}
		h.n.root.forgetContent(hidden)
	}
	return errno
}

var _ = (fs.FileAllocater)((*Handle)(nil))

func (h *Handle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	f := h.n.fileOf()
	if errno := h.n.flush(ctx); errno != 0 {
		return errno
	}
	p, done := h.n.holdPath()
	defer done()
	h.n.root.stats.roundTrips.Add(1)
	e, err := h.n.root.owner.Fallocate(ctx, p, mode, int64(off), int64(size))
	if err != nil {
		return toErrno(err)
	}
	h.n.mu.Lock()
	if int64(e.Size) > f.localSize {
		f.localSize = int64(e.Size)
	}
	h.n.mu.Unlock()
	h.n.root.replica.Put(p, e)
	h.n.root.forgetContent(p)
	return 0
}

var _ = (fs.FileGetattrer)((*Handle)(nil))

func (h *Handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.n.Getattr(ctx, h, out)
}

// failed maps err for the application; an EIO, which says nothing about its cause, is logged
// with the cause (an error path: never per chunk).
func (n *Node) failed(op string, err error) syscall.Errno {
	errno := toErrno(err)
	if errno == syscall.EIO {
		n.root.log.Warn(op+" failed with EIO", "path", n.path(), "err", err)
	}
	return errno
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
	if errno == syscall.EROFS {
		return 0 // a read-only share holds nothing of this mount's to make stable
	}
	return errno
}
