package fusefs

import (
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/peerfs/peerfs/internal/tree"
	"github.com/peerfs/peerfs/internal/wire"
)

// forgetContent drops the cached copy of a path. For changes this mount made itself that is
// all: the kernel already knows about its own writes and truncates.
func (r *Root) forgetContent(p string) {
	if r.cache != nil {
		r.cache.Invalidate(r.key(p))
	}
}

// nameTaken forgets what the replica says of p when the owner refused to make it because the
// name exists there (err is EEXIST): another device made it and its event has not arrived
// yet, so the next lookup asks the owner.
func (r *Root) nameTaken(p string, err error) {
	if toErrno(err) == syscall.EEXIST {
		r.replica.InvalidateEntry(p)
	}
}

// ApplyEvents applies the owner's change events: the replica learns the new attributes, the
// cache drops changed contents, and the kernel forgets its entries, attributes and pages of
// what changed. It runs on the event goroutine, never inside a FUSE operation, and holds no
// lock while notifying.
func (r *Root) ApplyEvents(events []wire.Event) {
	for _, ev := range events {
		p := ev.Path
		if r.journal != nil && r.journal.hold(ev) {
			continue // changes of this mount to p are on their way: applied after them
		}
		switch ev.Kind {
		case wire.EventChanged, wire.EventRemoved:
			// Events can trail this mount's own operations on the same name (an old removal
			// arriving after a new create): forget and let the next lookup ask the owner,
			// rather than apply the event's view.
			old, had := r.replica.Stat(p)
			node := r.node(p)
			// A state one of this mount's WRITEs left the file in, reported while its flush
			// still runs (the replica learns the final state when it ends) or after: nothing
			// changed that the kernel does not know. Dropping the pages and attributes of a
			// file being copied in at every such event took a sixth of the mount's CPU time,
			// and the next read of the file had to fetch it all again.
			if ev.Kind == wire.EventChanged && node != nil && ev.Entry.IsRegular() &&
				(node.isEcho(&ev.Entry) || node.eventDuringFlush(ev)) {
				continue
			}
			// Most events echo this mount's own operations (a create, the writes of a close,
			// an unlink): when the replica already shows what the event says, there is
			// nothing to forget, and the next lookup of the name costs no round trip. The
			// kernel's pages are another matter (pages.go): they may be older.
			if ev.Kind == wire.EventChanged && had && sameAttrs(&old, &ev.Entry) {
				if node != nil && ev.Entry.IsRegular() && !node.pagesHold(version(&ev.Entry)) {
					node.changedElsewhere()
					node.dropPagesNow()
				}
				continue
			}
			// An older state this mount's own writes left the file in, reported late.
			if ev.Kind == wire.EventChanged && had && node != nil && ev.Entry.IsRegular() && old.Ino == ev.Entry.Ino &&
				old.CtimeNs > ev.Entry.CtimeNs && node.pagesHold(version(&ev.Entry)) {
				continue
			}
			if ev.Kind == wire.EventRemoved && r.knownAbsent(p) {
				continue
			}
			if ev.Kind == wire.EventChanged && ev.Entry.IsDir() {
				// A directory's own attributes changed (its children come with their own
				// events): keep its listing, forget only its entry. A directory the replica
				// listed as absent is new, and the kernel may hold its name as missing.
				absent := r.knownAbsent(p)
				if r.journal != nil && had && !absent {
					// Nothing of this mount's waits to change it (hold): the event's entry
					// is the folder as it is, and the next getattr of it (git and make
					// stat the folders they write into) costs no round trip.
					r.replica.Put(p, ev.Entry)
					r.notify(p, false)
					continue
				}
				r.replica.InvalidateEntry(p)
				r.notify(p, absent)
				continue
			}
			r.replica.Invalidate(p)
			if ev.Kind == wire.EventRemoved || !had || old.Size != ev.Entry.Size || old.MtimeNs != ev.Entry.MtimeNs || old.Ino != ev.Entry.Ino {
				r.forgetContent(p)
			}
			if node != nil && ev.Kind == wire.EventChanged && !node.pagesHold(version(&ev.Entry)) {
				node.changedElsewhere()
			}
			r.notify(p, true)
		case wire.EventRescan:
			r.gen.Add(1)
			r.replica.Forget(p)
			if r.cache != nil {
				r.cache.InvalidatePrefix(r.opts.Peer, r.opts.Share, p)
			}
			r.notify(p, true)
		}
	}
}

// EventsFlowing tells the mount that a subscription to the owner's change events has begun
// (its head arrived): from now on every change is reported. Names looked up before it may have
// changed unreported, so on the first subscription what the replica learned before is
// forgotten (a later one follows a gap, which the caller covers with an EventRescan).
func (r *Root) EventsFlowing(first bool) {
	if first {
		r.replica.Forget("")
		r.notify("", false)
	}
	r.watching.Store(true)
}

// EventsStopped tells the mount that its subscription ended: until the next one, the kernel
// keeps no answer that a name does not exist.
func (r *Root) EventsStopped() { r.watching.Store(false) }

// sameAttrs reports whether two entries describe the same state of a file: everything but
// the access time, which reads change without changing the file.
func sameAttrs(a, b *wire.Entry) bool {
	return a.Mode == b.Mode && a.Size == b.Size && a.MtimeNs == b.MtimeNs && a.CtimeNs == b.CtimeNs &&
		a.Ino == b.Ino && a.Nlink == b.Nlink && a.UID == b.UID && a.GID == b.GID && a.Target == b.Target
}

// knownAbsent reports whether the replica lists p's directory and p is not in it.
func (r *Root) knownAbsent(p string) bool {
	if p == "" {
		return false
	}
	dir, name := tree.Split(p)
	_, found, listed := r.replica.Lookup(dir, name)
	return listed && !found
}

// notify tells the kernel to drop what it caches for p: pages and attributes of the inode,
// and the name in its parent when the name appeared or went away.
func (r *Root) notify(p string, name bool) {
	parent, ino := r.walk(p)
	if ino != nil {
		if ino.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFREG {
			r.stats.pageDrops.Add(1)
		}
		ino.NotifyContent(0, 0)
	}
	if name && parent != nil {
		_, base := tree.Split(p)
		parent.NotifyEntry(base)
	}
}

// node returns the Node of the inode the kernel knows for p, or nil.
func (r *Root) node(p string) *Node {
	if _, ino := r.walk(p); ino != nil {
		if n, ok := ino.Operations().(*Node); ok {
			return n
		}
	}
	return nil
}

// walk finds the inodes the kernel knows for p and its parent, without asking the owner.
func (r *Root) walk(p string) (parent, ino *fs.Inode) {
	cur := r.EmbeddedInode()
	if p == "" {
		return nil, cur
	}
	for _, name := range strings.Split(p, "/") {
		if cur == nil {
			return nil, nil
		}
		parent, cur = cur, cur.GetChild(name)
	}
	return parent, cur
}
