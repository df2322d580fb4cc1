package fusefs

import (
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
type pageState struct {
	ver   cache.Version // the version the kernel's pages hold, with this mount's writes on top
	known bool          // ver is set: false for a new inode and after a drop
	drop  bool          // the next open empties the pages
	// own holds the versions this mount's recent WRITEs left the file in, so that their
	// echoes as change events keep the pages.
	own  [ownVersions]cache.Version
	ownN int
	// elsewhere is when the owner last reported a change of the file that was not this
	// mount's own.
	elsewhere time.Time
}

const (
	ownVersions = 32
	// sharedWrites is how long after a change made elsewhere this mount stops trusting its
	// own flushes to be the only changes of the file.
	sharedWrites = 10 * time.Second
)

// openPages returns the open flags for an open that sees version v: keep the kernel's pages
// if they hold v, else empty them.
func (n *Node) openPages(v cache.Version) uint32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	ps := &n.pages
	keep := !ps.drop && (!ps.known || ps.ver == v)
	ps.ver, ps.known, ps.drop = v, true, false
	if keep {
		return fuse.FOPEN_KEEP_CACHE
	}
	return 0
}

// pagesHold reports whether the kernel's pages are known to hold version v.
func (n *Node) pagesHold(v cache.Version) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	ps := &n.pages
	if ps.known && ps.ver == v {
		return true
	}
	for i := range min(ps.ownN, ownVersions) {
		if ps.own[i] == v {
			return true
		}
	}
	return false
}

// ownVersion records that an operation of this mount left the file at version v, so that
// the owner's event for it, arriving late, is known for an echo.
func (n *Node) ownVersion(v cache.Version) {
	n.mu.Lock()
	n.pages.addOwn(v)
	n.mu.Unlock()
}

func (ps *pageState) addOwn(v cache.Version) {
	ps.own[ps.ownN%ownVersions] = v
	ps.ownN++
}

// changedElsewhere records that the owner reported a version of the file that the kernel's
// pages do not hold and this mount did not write: the caller has told the kernel to drop
// them.
func (n *Node) changedElsewhere() {
	n.mu.Lock()
	n.pages.known = false
	n.pages.elsewhere = time.Now()
	n.mu.Unlock()
}

// flushed updates what the kernel's pages hold after a flush: before is the file as the
// replica knew it when the flush began (if known), pres and posts the file's state before
// and after each WRITE, last the latest. Each WRITE must have found the file as it was known
// before or as one of this flush's WRITEs left it; otherwise, or when the file was changed
// elsewhere lately, the pages go, and foreign is true.
func (n *Node) flushed(known bool, before *wire.Entry, pres []wire.FileState, posts []wire.Entry, last *wire.Entry) (foreign bool) {
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
	ps := &n.pages
	if ps.known && ps.ver != version(before) {
		foreign = true // the pages were older than what the flush started from
	}
	if !ps.elsewhere.IsZero() && time.Since(ps.elsewhere) < sharedWrites {
		foreign = true
	}
	if !foreign {
		ps.ver, ps.known = version(last), true
		for i := range posts {
			ps.addOwn(version(&posts[i]))
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
	if !known || pre != before.State() {
		n.dropKernelPages()
		return
	}
	if sameContents && before.HasData && !after.HasData && after.Size == before.Size && after.Ino == before.Ino {
		after.Data, after.HasData = before.Data, true
	}
	n.mu.Lock()
	ps := &n.pages
	if ps.known && ps.ver == version(before) {
		ps.ver = version(after)
		ps.addOwn(ps.ver)
	}
	n.mu.Unlock()
}

// dropKernelPages makes the kernel forget the file's cached pages: now for open files (from
// another goroutine, since a notification from inside a FUSE operation can deadlock), and at
// the next open in any case (an open without FOPEN_KEEP_CACHE empties the page cache).
func (n *Node) dropKernelPages() {
	n.mu.Lock()
	n.pages.known, n.pages.drop = false, true
	n.mu.Unlock()
	go n.NotifyContent(0, 0)
}
