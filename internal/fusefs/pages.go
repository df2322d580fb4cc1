package fusefs

import (
	"slices"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/peerfs/peerfs/internal/cache"
	"github.com/peerfs/peerfs/internal/wire"
)

// The kernel keeps a file's pages across opens (FOPEN_KEEP_CACHE) until the mount tells it
// to drop them, so the mount tracks which version of the file those pages hold. An open of
// another version empties them; a change event for another version drops them at once,
// even when the event's attributes are already known (the replica may have learned them
// from a lookup, long after the pages were read); this mount's own writes keep them, since
// the kernel wrote them into its pages itself.
//
// Writes made elsewhere while this mount's WRITEs are in flight can hide in the file state
// the owner reports after one of them. A WRITE's reply also gives the state before it (NFS's
// weak cache consistency), which catches a change made before it, and a file that the owner
// reported changed elsewhere lately loses its pages after every flush of this mount
// (sharedWrites). A change made elsewhere in the microseconds between one of this mount's
// writes and the owner's look at the file after it can still go unseen, as with NFS: writers
// on two machines that need each other's bytes must use locks or close between writes.
//
// Pages and passthrough: a passthrough open makes the kernel empty the file's pages first
// (go-fuse cannot pass FOPEN_KEEP_CACHE with FOPEN_PASSTHROUGH), which for a file just read
// whole stalls the open for about 0.15 s per GiB here. So while the pages are known to hold
// the whole file, opens read them instead; once the file stays closed for PagesIdle, the
// mount drops them in the background and later opens use passthrough, which reads the
// chunk cache's file as fast as a local one. If memory pressure took some of those pages
// meanwhile, the kernel asks for them again with READs, served from the chunk cache.
type pageState struct {
	ver   cache.Version // the version the kernel's pages hold, with this mount's writes on top
	known bool          // ver is set: false for a new inode and after a drop
	drop  bool          // the next open empties the pages
	// read is what the kernel read of ver through READ replies since its pages were last
	// emptied or changed: its page cache holds those ranges, unless memory pressure took some.
	read spans
	// idle drops pages that hold a whole file once it has been closed for PagesIdle
	// (dropIdlePages).
	idle *time.Timer
	// own holds the versions this mount's recent WRITEs left the file in, so that their
	// echoes as change events keep the pages.
	own recent[cache.Version]
	// echoes holds the exact states (with ctime) this mount's recent WRITEs left the file
	// in, recorded as each reply arrives: a change event naming one of them is this mount's
	// own write, even while the flush that made it is still under way (echo).
	echoes recent[echo]
	// flushing counts the flushes of the file under way; deferred holds the change events
	// that arrived meanwhile and were not yet known for echoes (eventDuringFlush).
	flushing int
	deferred []wire.Event
	// elsewhere is when the owner last reported a change of the file that was not this
	// mount's own.
	elsewhere time.Time
}

// echo is a state of a file on the owner: a change made elsewhere changes its ctime at least.
type echo struct {
	state wire.FileState
	ino   uint64
}

func echoOf(e *wire.Entry) echo { return echo{e.State(), e.Ino} }

// recent keeps the last ownVersions values added. Its slots are allocated at the first add:
// only a file this mount writes or truncates has any.
type recent[T comparable] struct {
	v []T
	n int
}

func (r *recent[T]) add(x T) {
	if r.v == nil {
		r.v = make([]T, ownVersions)
	}
	r.v[r.n%ownVersions] = x
	r.n++
}

func (r *recent[T]) has(x T) bool {
	return slices.Contains(r.v[:min(r.n, len(r.v))], x)
}

const (
	// PagesIdle is how long the kernel's pages of a whole, fully cached file stay once the
	// file is closed: opens within it read those pages; later ones use passthrough.
	PagesIdle   = 5 * time.Second
	ownVersions = 64
	// sharedWrites is how long after a change made elsewhere this mount stops trusting its
	// own flushes to be the only changes of the file.
	sharedWrites = 10 * time.Second
)

// openPages returns the open flags for an open that sees version v: keep the kernel's pages
// if they hold v, else empty them.
func (n *Node) openPages(v cache.Version) uint32 {
	f := n.fileOf()
	n.mu.Lock()
	defer n.mu.Unlock()
	ps := &f.pages
	keep := !ps.drop && (!ps.known || ps.ver == v)
	if !keep || !ps.known {
		ps.read.reset()
	}
	ps.ver, ps.known, ps.drop = v, true, false
	if keep {
		return fuse.FOPEN_KEEP_CACHE
	}
	return 0
}

// readPages records that the kernel received [off, end) of version v in a READ reply for its
// page cache.
func (n *Node) readPages(v cache.Version, off, end int64) {
	f := n.fileOf()
	n.mu.Lock()
	if ps := &f.pages; ps.known && !ps.drop && ps.ver == v {
		ps.read.add(off, end)
	}
	n.mu.Unlock()
}

// pagesWhole reports whether the kernel's pages are known to hold all of version v. Right
// after a file was read whole (cp, then a checksum of the copy; a build reading its inputs
// twice), an open that reads those pages starts at once, while a passthrough open would
// first make the kernel empty them (a tenth of a second per gigabyte; go-fuse clears
// FOPEN_KEEP_CACHE on passthrough opens).
func (n *Node) pagesWhole(v cache.Version) bool {
	f := n.fileOf()
	n.mu.Lock()
	defer n.mu.Unlock()
	ps := &f.pages
	return ps.known && !ps.drop && ps.ver == v && ps.read.covers(v.Size)
}

// idlePages arms, at the last close of a file whose pages hold it whole, the drop of those
// pages PagesIdle later: the chunk cache holds the file too, and passthrough reads it from
// there as fast as a local file, so the kernel need not keep two copies.
func (n *Node) idlePages() {
	f := n.fileOf()
	n.mu.Lock()
	defer n.mu.Unlock()
	ps := &f.pages
	if n.opens > 0 || !ps.known || ps.drop || !ps.read.covers(ps.ver.Size) {
		return
	}
	if ps.idle == nil {
		ps.idle = time.AfterFunc(PagesIdle, n.dropIdlePages)
	} else {
		ps.idle.Reset(PagesIdle)
	}
}

// dropIdlePages empties the kernel's pages of a file still closed, in the background of any
// open: the next open uses passthrough.
func (n *Node) dropIdlePages() {
	f := n.fileOf()
	n.mu.Lock()
	ps := &f.pages
	idle := n.opens == 0 && ps.known && !ps.drop
	if idle {
		ps.known = false
		ps.read.reset()
	}
	n.mu.Unlock()
	if idle {
		n.dropPagesNow()
	}
}

// pagesHold reports whether the kernel's pages are known to hold version v.
func (n *Node) pagesHold(v cache.Version) bool {
	f := n.file.Load()
	if f == nil {
		return false // never opened: the kernel has no pages of it
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	ps := &f.pages
	return ps.known && ps.ver == v || ps.own.has(v)
}

// ownVersion records that an operation of this mount left the file at version v, so that
// the owner's event for it, arriving late, is known for an echo.
func (n *Node) ownVersion(v cache.Version) {
	f := n.fileOf()
	n.mu.Lock()
	f.pages.own.add(v)
	n.mu.Unlock()
}

// wroteState records that one of this mount's WRITEs left the file in state e on the owner,
// having found it in a state this mount knew or made: the change event for e is an echo.
// After a change made elsewhere lately, none is recorded (as flushed trusts no flush then).
func (n *Node) wroteState(e *wire.Entry) {
	f := n.fileOf()
	n.mu.Lock()
	ps := &f.pages
	if !ps.elsewhere.IsZero() && time.Since(ps.elsewhere) < sharedWrites {
		n.mu.Unlock()
		return
	}
	k := echoOf(e)
	ps.echoes.add(k)
	// An event that overtook this reply is an echo after all.
	ps.deferred = slices.DeleteFunc(ps.deferred, func(ev wire.Event) bool { return echoOf(&ev.Entry) == k })
	n.mu.Unlock()
}

// isEcho reports whether e is a state this mount's own WRITEs left the file in.
func (n *Node) isEcho(e *wire.Entry) bool {
	f := n.file.Load()
	if f == nil {
		return false // never written here
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return f.pages.echoes.has(echoOf(e))
}

// eventDuringFlush holds back a change event of the file that arrives while a flush of it
// runs and names no state this mount's WRITEs are known to have left: the owner often
// describes a file just after a WRITE and before its reply went out, so the event overtakes
// the reply that makes it an echo. The flush's end looks at it again (flushDone).
func (n *Node) eventDuringFlush(ev wire.Event) bool {
	f := n.file.Load()
	if f == nil {
		return false // no flush ever ran
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	ps := &f.pages
	if ps.flushing == 0 {
		return false
	}
	for i := range ps.deferred {
		if ps.deferred[i].Path == ev.Path {
			ps.deferred[i] = ev // the later event supersedes: it describes the file as it is now
			return true
		}
	}
	ps.deferred = append(ps.deferred, ev)
	return true
}

// flushStart and flushDone bracket a flush. The last flush to end applies the events held
// back meanwhile that still name no echo, from another goroutine (a flush runs inside FUSE
// operations, where notifying the kernel can deadlock).
func (n *Node) flushStart() {
	f := n.fileOf()
	n.mu.Lock()
	f.pages.flushing++
	n.mu.Unlock()
}

func (n *Node) flushDone() {
	f := n.fileOf()
	n.mu.Lock()
	ps := &f.pages
	ps.flushing--
	var foreign []wire.Event
	if ps.flushing == 0 {
		foreign = slices.DeleteFunc(ps.deferred, func(ev wire.Event) bool { return ps.echoes.has(echoOf(&ev.Entry)) })
		ps.deferred = nil
	}
	n.mu.Unlock()
	if len(foreign) > 0 {
		go n.root.ApplyEvents(foreign)
	}
}

// changedElsewhere records that the owner reported a version of the file that the kernel's
// pages do not hold and this mount did not write: the caller has told the kernel to drop
// them.
func (n *Node) changedElsewhere() {
	f := n.fileOf()
	n.mu.Lock()
	f.pages.known = false
	f.pages.read.reset()
	f.pages.elsewhere = time.Now()
	n.mu.Unlock()
}

// flushed updates what the kernel's pages hold after a flush: before is the file as the
// replica knew it when the flush began (if known), pres and posts the file's state before
// and after each WRITE, last the latest. Each WRITE must have found the file as it was known
// before or as one of this flush's WRITEs left it; otherwise, or when the file was changed
// elsewhere lately, the pages go, and foreign is true.
func (n *Node) flushed(known bool, before *wire.Entry, pres []wire.FileState, posts []wire.Entry, last *wire.Entry) (foreign bool) {
	f := n.fileOf()
	ours := map[wire.FileState]bool{before.State(): known}
	for i := range posts {
		ours[posts[i].State()] = true
	}
	foreign = !known
	for _, pre := range pres {
		if !ours[pre] {
			foreign = true
		}
	}
	n.mu.Lock()
	ps := &f.pages
	if ps.known && ps.ver != version(before) {
		foreign = true // the pages were older than what the flush started from
	}
	if !ps.elsewhere.IsZero() && time.Since(ps.elsewhere) < sharedWrites {
		foreign = true
	}
	ps.read.reset() // what the kernel wrote into its pages is not tracked
	if !foreign {
		ps.ver, ps.known = version(last), true
		for i := range posts {
			ps.own.add(version(&posts[i]))
		}
	}
	n.mu.Unlock()
	if foreign {
		n.dropKernelPages()
	}
	return foreign
}

// changedHere updates what the kernel's pages hold after a SETATTR this mount made: before
// is the file as the replica knew it (if known), pre the owner's view just before the change,
// after the result. A change that found the file as known leaves the pages true (the kernel
// applied a truncate to its own pages; a chmod or utime, sameContents, leaves the contents
// alone, and then after inherits before's inline contents); otherwise the pages go.
func (n *Node) changedHere(known bool, before *wire.Entry, pre wire.FileState, after *wire.Entry, sameContents bool) {
	f := n.fileOf()
	if !known || pre != before.State() {
		n.dropKernelPages()
		return
	}
	if sameContents && before.HasData && !after.HasData && after.Size == before.Size && after.Ino == before.Ino {
		after.Data, after.HasData = before.Data, true
	}
	n.mu.Lock()
	ps := &f.pages
	if ps.known && ps.ver == version(before) {
		ps.ver = version(after)
		ps.own.add(ps.ver)
	}
	ps.read.reset()
	n.mu.Unlock()
}

// dropKernelPages makes the kernel forget the file's cached pages: now for open files (from
// another goroutine, since a notification from inside a FUSE operation can deadlock), and at
// the next open in any case (an open without FOPEN_KEEP_CACHE empties the page cache).
func (n *Node) dropKernelPages() {
	f := n.fileOf()
	n.mu.Lock()
	f.pages.known, f.pages.drop = false, true
	f.pages.read.reset()
	n.mu.Unlock()
	go n.dropPagesNow()
}

// dropPagesNow tells the kernel to drop the file's pages and attributes (never from inside a
// FUSE operation on the file: that can deadlock).
func (n *Node) dropPagesNow() {
	n.root.stats.pageDrops.Add(1)
	n.NotifyContent(0, 0)
}

// spans is a set of byte ranges, kept sorted and merged: the kernel reads a file in large
// aligned pieces, mostly in order, so it stays a few entries long.
type spans struct{ s [][2]int64 }

func (sp *spans) reset() { sp.s = sp.s[:0] }

// add inserts [off, end), merging it with the ranges it touches.
func (sp *spans) add(off, end int64) {
	if end <= off {
		return
	}
	i := 0
	for i < len(sp.s) && sp.s[i][1] < off {
		i++
	}
	j := i
	for j < len(sp.s) && sp.s[j][0] <= end {
		off, end = min(off, sp.s[j][0]), max(end, sp.s[j][1])
		j++
	}
	if i == j {
		sp.s = append(sp.s, [2]int64{})
		copy(sp.s[i+1:], sp.s[i:])
	} else {
		sp.s = append(sp.s[:i+1], sp.s[j:]...)
	}
	sp.s[i] = [2]int64{off, end}
}

// covers reports whether [0, size) is in the set.
func (sp *spans) covers(size int64) bool {
	if size == 0 {
		return true
	}
	return len(sp.s) > 0 && sp.s[0][0] == 0 && sp.s[0][1] >= size
}
