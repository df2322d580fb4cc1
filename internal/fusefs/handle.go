package fusefs

import (
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
)

// Handle is an open file. Reads come from the inline content of a small file or from the
// chunk cache; writes go to the node's writeback extents.
type Handle struct {
	n        *Node
	file     *fileState // n's
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

	mu       sync.Mutex // guards the fields below
	cf       *cache.File
	released bool  // Release ran: later operations get EBADF (gone)
	lastEnd  int64 // end of the previous read: sequential readers get readahead
}

// gone reports whether the handle was released. An operation that lost a race with Release,
// or came after it, answers EBADF, as for a closed descriptor.
func (h *Handle) gone() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.released
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
	f := n.fileOf()
	h := &Handle{n: n, file: f, writable: flags&syscall.O_ACCMODE != syscall.O_RDONLY, lastEnd: -1,
		fills: flags&openDirect == 0}
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
	n, f := h.n, h.file
	n.root.stats.read.Add(int64(len(dest)))
	if h.gone() {
		return nil, syscall.EBADF
	}
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
	sequential := h.sequential(cf, off, end)
	if !cf.Present(off, end-off) {
		var filled bool
		cf, end, filled, errno = h.readMiss(ctx, cf, off, end, sequential, dest)
		if errno != 0 {
			return nil, errno
		}
		if filled {
			h.served(cf, off, end)
			return fuse.ReadResultData(dest[:end-off]), 0
		}
		if end <= off {
			return fuse.ReadResultData(nil), 0
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

// sequential reports whether a read of [off, end) of cf continues the handle's reads (or
// starts the file), and records it. The kernel's readahead sends a sequential reader's READs
// a few at a time and they are served concurrently, so they may arrive out of order: a read
// that the file's stream is about to bring is sequential too.
func (h *Handle) sequential(cf *cache.File, off, end int64) bool {
	h.mu.Lock()
	seq := off == 0 || off == h.lastEnd
	h.mu.Unlock()
	if !seq {
		seq = h.n.root.fetch.StreamCovers(h.n.path(), cf, off)
	}
	h.mu.Lock()
	if seq {
		h.lastEnd = max(h.lastEnd, end)
	} else {
		h.lastEnd = end
	}
	h.mu.Unlock()
	return seq
}

// readMiss serves a read of [off, end) that the cache does not hold: a sequential reader
// from the file's stream, a random one from READs, both straight into dest (filled); else (a
// stream that stopped first) it makes the range present in cf. A file changed on the owner
// since cf's version starts over once from its current version: cf is then replaced (the
// old reference released; nil on error) and end cut to the new size.
func (h *Handle) readMiss(ctx context.Context, cf *cache.File, off, end int64, sequential bool, dest []byte) (_ *cache.File, _ int64, filled bool, errno syscall.Errno) {
	n := h.n
	n.root.stats.misses.Add(1)
	var err error
	if sequential {
		n.root.stats.streamWaits.Add(1)
		ahead := min(end+n.root.opts.Readahead, cf.Version().Size)
		filled, err = n.root.fetch.ReadSequential(ctx, n.path(), cf, off, ahead, dest[:end-off])
		if err == nil && !filled { // the stream stopped first: tagged READs take over
			err = n.root.fetch.Fetch(ctx, n.path(), cf, off, end, end)
		}
	} else {
		err = n.root.fetch.ReadInto(ctx, n.path(), cf, off, dest[:end-off])
		filled = err == nil
	}
	if err == nil {
		return cf, end, filled, 0
	}
	if !errors.Is(err, fetch.ErrChanged) {
		return cf, end, false, n.failed("read", err)
	}
	// The file changed on the owner since this version was cached: start over from its
	// current attributes, once.
	n.root.forgetContent(n.path())
	n.root.replica.Invalidate(n.path())
	cf.Release()
	if cf, errno = h.cacheFile(ctx); errno != 0 {
		return nil, end, false, errno
	}
	end = min(off+int64(len(dest)), max(cf.Version().Size, off))
	if end > off {
		if err := n.root.fetch.Fetch(ctx, n.path(), cf, off, end, end); err != nil {
			return cf, end, false, n.failed("read", err)
		}
	}
	return cf, end, false, 0
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
	n, f := h.n, h.file
	n.root.stats.write.Add(int64(len(data)))
	if h.gone() {
		return 0, syscall.EBADF
	}
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

var _ = (fs.FileFlusher)((*Handle)(nil))

// Flush runs at every close(2) of a descriptor: close-to-open consistency means the data is
// on the owner when close returns, and a failed write is reported here.
func (h *Handle) Flush(ctx context.Context) syscall.Errno {
	h.n.root.stats.flush.Add(0)
	if h.gone() {
		return syscall.EBADF
	}
	if !h.writable {
		// A file created here by an open for reading (a lock file) still reaches the owner
		// at its close, as a written one does (create.go).
		if errno := h.n.ensureCreated(ctx); errno != 0 {
			return errno
		}
		return h.n.refusedChange()
	}
	if h.passWrite {
		if errno := h.n.sendPassWrites(ctx); errno != 0 {
			return errno
		}
	}
	if errno := h.n.flush(ctx); errno != 0 {
		return errno
	}
	return h.n.refusedChange()
}

// refusedChange reports, once, a journaled change of the file that the owner refused since
// the last fsync or close reported one (journal.go).
func (n *Node) refusedChange() syscall.Errno {
	if j := n.root.journal; j != nil {
		return toErrno(j.takeFailure(n.path()))
	}
	return 0
}

var _ = (fs.FileFsyncer)((*Handle)(nil))

func (h *Handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	h.n.root.stats.fsync.Add(0)
	if h.gone() {
		return syscall.EBADF
	}
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
	f := h.file
	h.n.root.stats.release.Add(0)
	h.mu.Lock()
	cf, again := h.cf, h.released
	h.cf, h.released = nil, true
	h.mu.Unlock()
	if again {
		return syscall.EBADF // its opens and writers are counted out already
	}
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
	f := h.file
	if h.gone() {
		return syscall.EBADF
	}
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
