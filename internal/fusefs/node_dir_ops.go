package fusefs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/peerfs/peerfs/internal/tree"
	"github.com/peerfs/peerfs/internal/wire"
)

var _ = (fs.NodeReaddirer)((*Node)(nil))

// Readdir lists from the replica, fetching the listing (one round trip, all attributes) when
// the directory is not known yet.
func (n *Node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	n.root.stats.readdir.Add(0)
	dir := n.path()
	entries, ok := n.root.replica.Entries(dir)
	if !ok {
		if err := n.list(ctx, dir); err != nil {
			return nil, toErrno(err)
		}
		entries, _ = n.root.replica.Entries(dir)
	} else {
		n.root.stats.hits.Add(1)
	}
	// "." and ".." as a local folder lists them (ls -a); go-fuse answers them itself.
	self := n.EmbeddedInode()
	up := self
	if _, p := self.Parent(); p != nil {
		up = p
	}
	list := make([]tree.DirEntry, 0, len(entries)+2)
	list = append(list,
		tree.DirEntry{Name: ".", Mode: syscall.S_IFDIR, Ino: self.StableAttr().Ino},
		tree.DirEntry{Name: "..", Mode: syscall.S_IFDIR, Ino: up.StableAttr().Ino})
	for _, e := range entries {
		if strings.HasPrefix(e.Name, hiddenPrefix) {
			continue // unlinked files still open somewhere
		}
		list = append(list, tree.DirEntry{Name: e.Name, Mode: e.Mode, Ino: n.root.kernelIno(e.Ino)})
	}
	if n.localKids.Load() > 0 {
		list = n.listLocalKids(list, entries)
	}
	return &listStream{entries: list}, 0
}

// listStream hands a listing to go-fuse an entry at a time. It holds the replica's small
// copies (32 bytes each) rather than a second slice of fuse.DirEntry: a listing of a
// million names is held for as long as the folder is open.
type listStream struct {
	idx     int
	entries []tree.DirEntry
}

var _ = (fs.FileSeekdirer)((*listStream)(nil))

func (l *listStream) HasNext() bool { return l.idx < len(l.entries) }

func (l *listStream) Next() (fuse.DirEntry, syscall.Errno) {
	e := &l.entries[l.idx]
	l.idx++
	return fuse.DirEntry{Name: e.Name, Mode: e.Mode, Ino: e.Ino, Off: uint64(l.idx)}, 0
}

// Seekdir places the stream at the offset a previous Next gave (telldir, or the kernel
// resuming a listing).
func (l *listStream) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off > uint64(len(l.entries)) {
		return syscall.EINVAL
	}
	l.idx = int(off)
	return 0
}

func (l *listStream) Close() {}

var _ = (fs.NodeMkdirer)((*Node)(nil))

func (n *Node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.checkNew(name); errno != 0 {
		return nil, errno
	}
	n.root.stats.mkdir.Add(0)
	p := n.childPath(name)
	if _, found, listed := n.root.replica.Lookup(n.path(), name); listed && found {
		return nil, syscall.EEXIST // known here: no round trip
	}
	n.root.changeAsked()
	e, err := n.root.owner.Mkdir(ctx, p, mode&0o7777) // exclusive, as mkdir(2)
	if err != nil {
		n.root.nameTaken(p, err)
		return nil, toErrno(err)
	}
	n.giveToCaller(ctx, p, &e)
	n.root.replica.Put(p, e)
	n.root.replica.SetDir(p, nil)
	n.dirChanged(+1, e.CtimeNs)
	ino := n.newChild(ctx, &e, out)
	// The owner made both directories writable for itself: files created in them may be
	// created there later (create.go).
	n.createsOK.Store(true)
	if cn, ok := ino.Operations().(*Node); ok {
		cn.createsOK.Store(true)
	}
	return ino, 0
}

var _ = (fs.NodeSymlinker)((*Node)(nil))

func (n *Node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.checkNew(name); errno != 0 {
		return nil, errno
	}
	n.root.stats.symlink.Add(0)
	p := n.childPath(name)
	if _, found, listed := n.root.replica.Lookup(n.path(), name); listed && found {
		return nil, syscall.EEXIST // known here: no round trip
	}
	n.root.changeAsked()
	e, err := n.root.owner.Symlink(ctx, p, target) // exclusive, as symlink(2)
	if err != nil {
		n.root.nameTaken(p, err)
		return nil, toErrno(err)
	}
	n.giveToCaller(ctx, p, &e)
	n.root.replica.Put(p, e)
	n.dirChanged(0, e.CtimeNs)
	return n.newChild(ctx, &e, out), 0
}

var _ = (fs.NodeLinker)((*Node)(nil))

func (n *Node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.checkNew(name); errno != 0 {
		return nil, errno
	}
	n.root.stats.link.Add(0)
	tn, ok := target.(*Node)
	if !ok {
		return nil, syscall.EXDEV
	}
	p := n.childPath(name)
	if errno := tn.ensureCreated(ctx); errno != 0 {
		return nil, errno
	}
	n.root.changeAsked()
	e, err := n.root.owner.Link(ctx, tn.path(), p)
	if err != nil {
		return nil, toErrno(err)
	}
	n.root.replica.Put(p, e)
	n.root.replica.Put(tn.path(), e) // nlink changed
	if e.Nlink > 2 {
		n.root.replica.SetLinks(e.Ino, e.Nlink, e.CtimeNs) // and the file's other names
	}
	n.dirChanged(0, e.CtimeNs)
	return n.newChild(ctx, &e, out), 0
}

var _ = (fs.NodeCreater)((*Node)(nil))

// Create makes a regular file on the owner and opens it.
func (n *Node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if errno := n.checkNew(name); errno != 0 {
		return nil, nil, 0, errno
	}
	n.root.stats.create.Add(0)
	p := n.childPath(name)
	var cf uint32
	if flags&syscall.O_EXCL != 0 {
		cf |= wire.CreateExclusive
	}
	if flags&syscall.O_TRUNC != 0 {
		cf |= wire.CreateTruncate
	}
	// A file another user creates goes to the owner at once, to be given to that user.
	if !n.root.foreignCaller(ctx) {
		if ino, h, fuseFlags, errno, ok := n.createLocally(ctx, name, p, flags, mode, cf, out); ok {
			if errno != 0 {
				return nil, nil, 0, errno
			}
			return ino, h, fuseFlags, 0
		}
	}
	n.root.changeAsked()
	// Another user's create is exclusive first, so that only a file it made is given to it.
	foreign := n.root.foreignCaller(ctx)
	made := foreign
	e, err := n.root.owner.Create(ctx, p, mode&0o7777, cf|boolFlag(foreign, wire.CreateExclusive))
	if foreign && cf&wire.CreateExclusive == 0 && toErrno(err) == syscall.EEXIST {
		made = false
		e, err = n.root.owner.Create(ctx, p, mode&0o7777, cf)
	}
	if err != nil {
		return nil, nil, 0, toErrno(err)
	}
	if made {
		n.giveToCaller(ctx, p, &e)
	}
	n.createsOK.Store(true)
	n.root.replica.Put(p, e)
	n.dirChanged(0, e.CtimeNs)
	ino := n.newChild(ctx, &e, out)
	child := ino.Operations().(*Node)
	child.ownVersion(version(&e))
	if flags&syscall.O_TRUNC != 0 {
		child.mu.Lock()
		child.fileOf().localSize = 0
		child.mu.Unlock()
		child.fileOf().wb.Truncate(0)
		n.root.forgetContent(p)
	}
	if errno := child.reserveOpen(); errno != 0 {
		return nil, nil, 0, errno
	}
	h, fuseFlags, errno := child.openHandle(ctx, flags, &e)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return ino, h, fuseFlags, 0
}

var _ = (fs.NodeUnlinker)((*Node)(nil))

func (n *Node) Unlink(ctx context.Context, name string) syscall.Errno {
	n.root.stats.unlink.Add(0)
	p := n.childPath(name)
	if errno := n.ensureChildCreated(ctx, name); errno != 0 {
		return errno
	}
	// The kernel's open sends OPEN after its lookup, and its flushes, fsyncs and xattr
	// calls use the file's path: while the name changes, they wait (holdPath, reserveOpen).
	cn := n.childNode(name)
	if cn != nil {
		cn.beginNaming()
		defer cn.endNaming()
	}
	if hid, errno := n.hideIfOpen(ctx, cn, p); hid || errno != 0 {
		if errno == 0 {
			n.root.replica.Remove(p)
			n.dirChanged(0, time.Now().UnixNano())
		}
		return errno
	}
	before, known := n.root.replica.Stat(p)
	lastName := cn != nil && cn.links(p) <= 1
	n.root.changeAsked()
	if err := n.root.owner.Unlink(ctx, p); err != nil {
		return toErrno(err)
	}
	now := time.Now().UnixNano()
	if known && before.Nlink > 1 {
		n.root.replica.SetLinks(before.Ino, before.Nlink-1, now) // the file's other names
	}
	if lastName {
		cn.deleted()
		cn.dropAlias()
	}
	n.root.replica.Remove(p)
	n.dirChanged(0, now)
	n.root.forgetContent(p)
	return 0
}

var _ = (fs.NodeRmdirer)((*Node)(nil))

func (n *Node) Rmdir(ctx context.Context, name string) syscall.Errno {
	n.root.stats.rmdir.Add(0)
	p := n.childPath(name)
	if cn := n.childNode(name); cn != nil && cn.localKids.Load() > 0 {
		return syscall.ENOTEMPTY // it holds files created here, not yet on the owner
	}
	n.root.changeAsked()
	err := n.root.owner.Rmdir(ctx, p)
	// The kernel sends RELEASE after close(2) returns, so a file unlinked while open may
	// still be hidden in the directory for a moment: give those releases time to land.
	for wait := 0; toErrno(err) == syscall.ENOTEMPTY && wait < 100 && n.onlyHidden(ctx, p); wait++ {
		time.Sleep(50 * time.Millisecond)
		err = n.root.owner.Rmdir(ctx, p)
	}
	if err != nil {
		return toErrno(err)
	}
	n.root.replica.Remove(p)
	n.dirChanged(-1, time.Now().UnixNano())
	return 0
}

// onlyHidden reports whether directory p on the owner holds nothing but files unlinked
// while open through a mount. Nothing at all counts: the last of them may have gone between
// the RMDIR that found it and this listing, and the next RMDIR succeeds.
func (n *Node) onlyHidden(ctx context.Context, p string) bool {
	errVisible := errors.New("a visible name")
	err := n.root.owner.List(ctx, p, 0, func(page []wire.Entry) error {
		for _, e := range page {
			if !strings.HasPrefix(e.Name, hiddenPrefix) {
				return errVisible
			}
		}
		return nil
	})
	return err == nil
}

var _ = (fs.NodeRenamer)((*Node)(nil))

// Rename supports RENAME_NOREPLACE and RENAME_EXCHANGE (renameat2 flags pass through).
func (n *Node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if errno := checkName(name); errno != 0 {
		return errno
	}
	n.root.stats.rename.Add(0)
	np, ok := newParent.(*Node)
	if !ok {
		if r, isRoot := newParent.(*Root); isRoot {
			np = &r.Node
		} else {
			return syscall.EXDEV
		}
	}
	if errno := np.checkNew(newName); errno != 0 {
		return errno
	}
	from, to := n.childPath(name), np.childPath(newName)
	var wf uint32
	switch flags {
	case 0:
	case renameNoReplace:
		wf = wire.RenameNoReplace
	case fs.RENAME_EXCHANGE:
		wf = wire.RenameExchange
	default:
		return syscall.EINVAL
	}
	// Names that exist only here so far must be on the owner for it to rename them (the
	// source is, once flushed below).
	if errno := np.ensureChildCreated(ctx, newName); errno != 0 {
		return errno
	}
	// Data written under the old name must land before the name changes.
	if cn := n.childNode(name); cn != nil {
		if errno := cn.flush(ctx); errno != 0 {
			return errno
		}
	}
	// A file open here under the target name lives on, hidden, until its last close; its
	// opens and path users wait while its name changes (Unlink).
	var replacedNode *Node
	if wf == 0 {
		if replacedNode = np.childNode(newName); replacedNode != nil && replacedNode != n.childNode(name) {
			replacedNode.beginNaming()
			defer replacedNode.endNaming()
		} else {
			replacedNode = nil
		}
		if _, errno := np.hideIfOpen(ctx, replacedNode, to); errno != 0 {
			return errno
		}
	}
	replacedLast := replacedNode != nil && replacedNode.links(to) <= 1
	// An open file being renamed: its operations must not reach the owner by the old name
	// after the rename did, nor an open that raced the rename look for it there.
	var movedNode *Node
	if wf == 0 {
		if movedNode = n.childNode(name); movedNode != nil && movedNode != replacedNode && !movedNode.IsDir() {
			movedNode.beginNaming()
			defer movedNode.endNaming()
		} else {
			movedNode = nil
		}
	}
	moved, movedKnown := n.root.replica.Stat(from)
	replaced, replacedKnown := n.root.replica.Stat(to)
	n.root.changeAsked()
	if err := n.root.owner.Rename(ctx, from, to, wf); err != nil {
		return toErrno(err)
	}
	if replacedLast {
		replacedNode.deleted()
		replacedNode.dropAlias()
	}
	if movedNode != nil {
		movedNode.mu.Lock()
		rn := movedNode.renames()
		rn.movedFrom, rn.movedTo = from, to
		movedNode.mu.Unlock()
	}
	if wf == wire.RenameExchange {
		n.root.replica.Exchange(from, to)
	} else {
		n.showRename(np, from, to, moved, movedKnown, replaced, replacedKnown)
	}
	n.root.forgetContent(from)
	n.root.forgetContent(to)
	return 0
}

// showRename shows in the replica what the owner did for a rename of from in n to to in np, as a
// local file system shows it at once: both directories' times, their link counts when a
// directory moved between them or one was replaced, and the ctime of what moved and of a
// multiply linked file that lost this name. moved and replaced are the replica's entries of
// from and to before the rename, if it knew them.
func (n *Node) showRename(np *Node, from, to string, moved wire.Entry, movedKnown bool, replaced wire.Entry, replacedKnown bool) {
	now := time.Now().UnixNano()
	var out, in int
	if movedKnown && moved.IsDir() && n != np {
		out, in = -1, +1
	}
	if replacedKnown && replaced.IsDir() {
		in--
	}
	if replacedKnown && !replaced.IsDir() && replaced.Nlink > 1 && (!movedKnown || replaced.Ino != moved.Ino) {
		n.root.replica.SetLinks(replaced.Ino, replaced.Nlink-1, now)
	}
	n.root.replica.Rename(from, to)
	n.root.replica.Touched(to, now)
	n.dirChanged(out, now)
	if np != n {
		np.dirChanged(in, now)
	} else if in != 0 {
		n.dirChanged(in, now)
	}
}

// dirChanged records that this mount changed the names in directory n at atNs (the new
// entry's ctime when the owner gave one), with subdirs subdirectories more or fewer: the
// directory's times and link count show it at once, as on a local disk (tree.DirChanged).
func (n *Node) dirChanged(subdirs int, atNs int64) {
	n.root.replica.DirChanged(n.path(), subdirs, atNs)
}

// renameNoReplace is Linux's RENAME_NOREPLACE flag of renameat2 (go-fuse names only EXCHANGE).
const renameNoReplace = 0x1

// hideIfOpen handles the removal of name p, the file of cn (nil when the kernel knows none),
// while cn is open here (by unlink, or by a rename over it): like NFS, the file is renamed on
// the owner to a hidden name, keeps working for its open descriptors, and is deleted at the
// last close. It reports whether it did so. The caller holds cn's naming (beginNaming), so
// no open or path user of cn runs meanwhile.
func (n *Node) hideIfOpen(ctx context.Context, cn *Node, p string) (bool, syscall.Errno) {
	if cn == nil {
		return false, 0
	}
	nlink := cn.links(p)
	cn.mu.Lock()
	open := cn.opens > 0 && nlink <= 1 && cn.hiddenName() == ""
	cn.mu.Unlock()
	if !open {
		return false, 0
	}
	hidden := tree.Join(n.path(), fmt.Sprintf("%s%016x", hiddenPrefix, rand.Uint64()))
	n.root.changeAsked()
	if err := n.root.owner.Rename(ctx, p, hidden, wire.RenameNoReplace); err != nil {
		return false, toErrno(err)
	}
	// The last close may have come while the rename was on its way (RELEASE does not wait
	// for naming): then nobody is left to delete the hidden file.
	cn.mu.Lock()
	closed := cn.opens == 0
	if closed {
		cn.gone = true
	} else {
		cn.renames().hidden = hidden
	}
	cn.mu.Unlock()
	if closed {
		cn.dropAlias()
		n.root.changeAsked()
		if err := n.root.owner.Unlink(ctx, hidden); err != nil {
			n.root.log.Warn("could not delete an unlinked file on the owner", "path", hidden, "err", err)
		}
	}
	return true, 0
}

// links is the link count of file n, named p, as the replica now has it: the attributes the
// node last showed the kernel may predate the removal of its other names through this mount.
func (n *Node) links(p string) uint32 {
	n.mu.Lock()
	nlink := n.nlink
	n.mu.Unlock()
	if e, ok := n.root.replica.Stat(p); ok {
		nlink = e.Nlink
	}
	return nlink
}

// deleted records that the owner deleted the file while nothing here had it open: an open
// that raced the removal starts over (reserveOpen).
func (n *Node) deleted() {
	n.mu.Lock()
	if n.hiddenName() == "" { // else its last close deletes it (Release)
		n.gone = true
	}
	n.mu.Unlock()
}
