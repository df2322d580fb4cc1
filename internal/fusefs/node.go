package fusefs

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/peerfs/peerfs/internal/cache"
	"github.com/peerfs/peerfs/internal/tree"
	"github.com/peerfs/peerfs/internal/wire"
	"github.com/peerfs/peerfs/internal/writeback"
)

// Node is one file, directory or symlink of the share. A listing makes one for every entry
// the kernel looks up, so a Node holds only what every inode needs; what only a file opened
// or written through this mount needs (fileState) is allocated at its first open, truncate,
// or change event, and most Nodes of a large folder never get one (ARCHITECTURE.md gives the
// memory per entry).
type Node struct {
	fs.Inode
	root *Root

	// mu guards the fields below up to createMu, and those of file that say so. Never held
	// across a call to the owner or a kernel notify.
	mu    sync.Mutex
	opens int32  // open handles
	nlink uint32 // the link count last shown to the kernel (links)
	// The file's name on the owner changes through this mount (an unlink that hides or
	// deletes it) only while no operation addresses the file by that name (holdPath):
	// pathUsers counts those operations, naming says a change is under way, which they
	// wait for, and nameCond (on mu) wakes both sides. gone says the file was deleted on
	// the owner while no descriptor had it open: an open that raced the unlink is retried
	// by the kernel (reserveOpen).
	pathUsers int32
	naming    bool
	gone      bool
	nameCond  *sync.Cond
	// renamed is set once the file is unlinked while open or renamed through this mount.
	renamed *renamed
	// file is set once and never cleared; nil for an inode never opened or written here.
	file atomic.Pointer[fileState]

	// creating is set while the file exists only in this mount (create.go). createMu guards
	// it and ownerIno, and is held across the CREATE that ends it.
	createMu sync.Mutex
	creating *localCreate
	ownerIno uint64 // the owner's inode number of a file created here, once it is there

	// For directories: createsOK says the owner accepted a CREATE or MKDIR in it from this
	// mount; localKids counts the files in it that exist only here.
	createsOK atomic.Bool
	localKids atomic.Int32
	// createLost says the owner refused to create this file (createError).
	createLost atomic.Bool
}

// renamed is how the file's name on the owner differs from its name in the kernel's tree.
// Node.mu guards it.
type renamed struct {
	// hidden is the owner-side name of a file unlinked while open here: like NFS, the file
	// is renamed to a hidden name instead of deleted, and deleted at the last close.
	hidden string
	// movedFrom and movedTo: a rename through this mount moved the file on the owner, and
	// go-fuse moves its name only once Rename has returned: until then path() answers
	// movedTo.
	movedFrom, movedTo string
}

// fileState is what a file opened, written or truncated through this mount needs beyond
// its inode. Node.mu guards the fields down to pages; wb and flushMu have locks of their own.
type fileState struct {
	localSize int64 // size including data not yet sent, -1 when none is pending
	writers   int   // open handles that may write
	passOpens int   // open handles served by passthrough
	// While the file is open by passthrough: passCF is the cache file the kernel reads and
	// writes (the backing file, a reference of the node's own), passWriters counts the
	// passthrough opens that may write it, and passSent is its state when the owner last got
	// it whole (handle_passthrough.go).
	passCF      *cache.File
	passWriters int
	passSent    fileStamp
	last        wire.Entry // the attributes last seen, for Getattr while the file is written
	// flushTimer sends dirty data flushDelay after the first unsent write, for files kept
	// open for long (editors, logs, databases); timerArmed says it is pending.
	flushTimer *time.Timer
	timerArmed bool
	// behind says a write-behind flush runs in the background (writeBehind).
	behind bool
	// pages is what the kernel's page cache holds of the file (pages.go).
	pages pageState

	wb writeback.File
	// flushMu serialises the file's flushes (flushWith).
	flushMu sync.Mutex
}

// fileOf returns the node's fileState, making it at the first call.
func (n *Node) fileOf() *fileState {
	if f := n.file.Load(); f != nil {
		return f
	}
	n.file.CompareAndSwap(nil, &fileState{localSize: -1})
	return n.file.Load()
}

func (n *Node) path() string {
	n.mu.Lock()
	var hidden, from, to string
	if rn := n.renamed; rn != nil {
		hidden, from, to = rn.hidden, rn.movedFrom, rn.movedTo
	}
	n.mu.Unlock()
	if hidden != "" {
		return hidden
	}
	p := n.Path(n.root.EmbeddedInode())
	if to != "" {
		if p == from {
			return to // renamed on the owner; go-fuse moves the name once Rename returns
		}
		n.mu.Lock()
		if n.renamed.movedTo == to {
			n.renamed.movedFrom, n.renamed.movedTo = "", ""
		}
		n.mu.Unlock()
	}
	return p
}

// hiddenName returns the file's hidden name on the owner (renamed), "" when it has none.
// mu is held.
func (n *Node) hiddenName() string {
	if n.renamed == nil {
		return ""
	}
	return n.renamed.hidden
}

// renames returns renamed, making it. mu is held.
func (n *Node) renames() *renamed {
	if n.renamed == nil {
		n.renamed = &renamed{}
	}
	return n.renamed
}

// holdPath returns the file's path on the owner and keeps it from changing through this
// mount until done is called: an operation on an open descriptor must reach the file it
// opened, whatever another thread does to its name meanwhile (POSIX). Without it, an unlink
// that renames an open file to its hidden name on the owner (hideIfOpen) lands between the
// moment an fsync, a flush at close or an fsetxattr reads the path and the moment the owner
// resolves it, which then answers ENOENT, or reaches another file given that name.
// Holds nest: a change waits until none is held, and a new hold waits only for a change
// already under way.
func (n *Node) holdPath() (p string, done func()) {
	n.mu.Lock()
	for n.naming {
		n.cond().Wait()
	}
	n.pathUsers++
	n.mu.Unlock()
	return n.path(), n.dropPath
}

func (n *Node) dropPath() {
	n.mu.Lock()
	if n.pathUsers--; n.pathUsers == 0 {
		n.cond().Broadcast()
	}
	n.mu.Unlock()
}

// beginNaming waits until no operation holds the file's path, and keeps new ones waiting
// until endNaming: the name on the owner is about to change (hideIfOpen) or go.
func (n *Node) beginNaming() {
	n.mu.Lock()
	for n.pathUsers > 0 || n.naming {
		n.cond().Wait()
	}
	n.naming = true
	n.mu.Unlock()
}

func (n *Node) endNaming() {
	n.mu.Lock()
	n.naming = false
	n.cond().Broadcast()
	n.mu.Unlock()
}

// cond returns nameCond. mu is held.
func (n *Node) cond() *sync.Cond {
	if n.nameCond == nil {
		n.nameCond = sync.NewCond(&n.mu)
	}
	return n.nameCond
}

// reserveOpen counts an open of the file before it reaches the owner, so that an unlink
// from another thread sees it and hides the file instead of deleting it (hideIfOpen). The
// kernel sends OPEN after the path lookup, without the directory's lock: an unlink can come
// between the two. If the unlink deleted the file first, the open answers ESTALE, on which
// the kernel walks the path once more, revalidating it (do_filp_open's LOOKUP_REVAL retry,
// as for NFS): the open then finds the name free and creates it (O_CREAT), or answers
// ENOENT, as if it had come after the unlink.
func (n *Node) reserveOpen() syscall.Errno {
	n.mu.Lock()
	defer n.mu.Unlock()
	for n.naming {
		n.cond().Wait()
	}
	if n.gone {
		return syscall.ESTALE
	}
	n.opens++
	n.fileOf()
	return 0
}

// unreserveOpen gives back a reservation of an open that failed.
func (n *Node) unreserveOpen() {
	n.mu.Lock()
	n.opens--
	n.mu.Unlock()
}

// hiddenPrefix starts the owner-side names of files unlinked while open through a mount.
const hiddenPrefix = ".peerfs-unlinked-"

// entry returns the node's attributes: from the replica when its directory is listed, else
// from the owner.
func (n *Node) entry(ctx context.Context) (wire.Entry, error) {
	if e, ok := n.localEntry(); ok {
		return e, nil
	}
	p := n.path()
	if e, ok := n.root.replica.Stat(p); ok {
		return e, nil
	}
	n.root.stats.roundTrips.Add(1)
	e, err := n.root.owner.Stat(ctx, p)
	if err != nil {
		return e, err
	}
	n.root.replica.Put(p, e)
	return e, nil
}

// fill converts an Entry into kernel attributes, with the local view of a file being written.
func (n *Node) fill(e *wire.Entry, out *fuse.Attr) {
	out.Ino = n.root.kernelIno(e.Ino)
	out.Size = e.Size
	n.mu.Lock()
	n.nlink = e.Nlink
	if f := n.file.Load(); f != nil {
		f.last = *e
		if f.localSize >= 0 && f.writers > 0 && uint64(f.localSize) > out.Size {
			out.Size = uint64(f.localSize)
		}
	}
	unlinked := n.hiddenName() != ""
	n.mu.Unlock()
	out.Blocks = (out.Size + 511) / 512
	out.Atime, out.Atimensec = uint64(e.AtimeNs/1e9), uint32(e.AtimeNs%1e9)
	out.Mtime, out.Mtimensec = uint64(e.MtimeNs/1e9), uint32(e.MtimeNs%1e9)
	out.Ctime, out.Ctimensec = uint64(e.CtimeNs/1e9), uint32(e.CtimeNs%1e9)
	out.Mode = e.Mode
	out.Rdev = uint32(e.Rdev)
	out.Nlink = max(e.Nlink, 1)
	if unlinked {
		out.Nlink = 0 // unlinked, still open
	}
	uid, gid := e.UID, e.GID
	if e.Ino >= localInoBase {
		// Created here, not on the owner yet: it will be the owner's daemon's (owners.go).
		uid, gid = n.root.opts.OwnerUID, n.root.opts.OwnerGID
	}
	out.Uid, out.Gid = n.root.shownIDs(uid, gid)
	out.Blksize = uint32(n.root.opts.Blksize)
}

// newChild makes (or finds) the inode for an entry.
func (n *Node) newChild(ctx context.Context, e *wire.Entry, out *fuse.EntryOut) *fs.Inode {
	child := &Node{root: n.root}
	ino := n.NewInode(ctx, child, fs.StableAttr{Mode: e.Mode & syscall.S_IFMT, Ino: n.root.kernelIno(e.Ino), Gen: n.root.gen.Load()})
	if ops, ok := ino.Operations().(*Node); ok {
		ops.mu.Lock()
		ops.gone = false // the owner gave a deleted file's inode number to a new one
		ops.mu.Unlock()
		ops.fill(e, &out.Attr)
	}
	return ino
}

var _ = (fs.NodeLookuper)((*Node)(nil))

// Lookup answers from the replica once the directory is listed; otherwise one READDIR lists
// it (with small files inline) and answers this and every later lookup in it.
func (n *Node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.root.stats.lookup.Add(0)
	if len(name) > wire.MaxNameLen {
		return nil, syscall.ENAMETOOLONG
	}
	if n.localKids.Load() > 0 {
		// A file created here that the owner has not got yet: the replica may have lost
		// its name to a rescan.
		if cn := n.childNode(name); cn != nil {
			if e, local := cn.localEntry(); local {
				cn.fill(&e, &out.Attr)
				return cn.EmbeddedInode(), 0
			}
		}
	}
	dir := n.path()
	e, found, listed := n.root.replica.Lookup(dir, name)
	switch {
	case listed:
		n.root.stats.hits.Add(1)
	case n.root.replica.DirListed(dir):
		// The directory is known but this name changed on the owner: ask for it alone.
		p := tree.Join(dir, name)
		n.root.stats.roundTrips.Add(1)
		var err error
		e, err = n.root.owner.Stat(ctx, p)
		if toErrno(err) == syscall.ENOENT {
			n.root.replica.Remove(p)
			return nil, n.root.absent(out)
		}
		if err != nil {
			return nil, toErrno(err)
		}
		n.root.replica.Put(p, e)
		found = true
	default:
		if err := n.list(ctx, dir); err != nil {
			return nil, toErrno(err)
		}
		e, found, _ = n.root.replica.Lookup(dir, name)
	}
	if !found {
		return nil, n.root.absent(out)
	}
	return n.newChild(ctx, &e, out), 0
}

// absent answers a lookup of a name that does not exist. The kernel keeps such an answer
// for the mount's negative timeout (negativeTimeout) while change events flow, since the
// event for the name's creation tells it to forget; without events it could not learn of
// the name, so it keeps the answer only for an instant.
func (r *Root) absent(out *fuse.EntryOut) syscall.Errno {
	if !r.watching.Load() {
		out.SetEntryTimeout(time.Nanosecond)
	}
	return syscall.ENOENT
}

// list fetches a directory listing into the replica.
func (n *Node) list(ctx context.Context, dir string) error {
	n.root.stats.roundTrips.Add(1)
	n.root.stats.misses.Add(1)
	l := n.root.replica.NewListing()
	err := n.root.owner.List(ctx, dir, n.root.opts.Inline, func(page []wire.Entry) error {
		l.Add(page)
		return nil
	})
	if err != nil {
		return err
	}
	n.root.replica.SetListing(dir, l)
	return nil
}

var _ = (fs.NodeGetattrer)((*Node)(nil))

func (n *Node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.root.stats.getattr.Add(0)
	n.passSize()
	// While this mount writes a file, its own view is the one that matters (close-to-open):
	// the kernel asks for attributes around every write, and must not wait for the owner.
	var last wire.Entry
	writing := false
	n.mu.Lock()
	if f := n.file.Load(); f != nil {
		last, writing = f.last, f.writers > 0 && f.last.Mode != 0
	}
	n.mu.Unlock()
	if writing {
		if e, ok := n.root.replica.Stat(n.path()); ok {
			last = e
		}
		n.fill(&last, &out.Attr)
		return 0
	}
	e, err := n.entry(ctx)
	if err != nil {
		return toErrno(err)
	}
	n.fill(&e, &out.Attr)
	return 0
}

var _ = (fs.NodeSetattrer)((*Node)(nil))

// Setattr sends mode, times, size, owner and group changes to the owner (owners.go). Pending writes go first, so a
// truncate or an mtime set after writing is not undone by them.
func (n *Node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	n.root.stats.setattr.Add(0)
	p, done := n.holdPath()
	defer done()
	req := wire.SetAttrReq{Path: p}
	if m, ok := in.GetMode(); ok {
		req.Valid |= wire.SetMode
		req.Mode = m & 0o7777
	}
	if sz, ok := in.GetSize(); ok {
		req.Valid |= wire.SetSize
		req.Size = sz
		n.fileOf().wb.Truncate(int64(sz))
	}
	if in.Valid&fuse.FATTR_KILL_SUIDGID != 0 && req.Valid&wire.SetMode == 0 {
		// A truncate by a process without CAP_FSETID (HANDLE_KILLPRIV_V2, killpriv.go).
		if e, known := n.root.replica.Stat(p); known {
			if mode, kill := killedMode(e.Mode); kill {
				req.Valid |= wire.SetMode
				req.Mode = mode
			}
		}
	}
	if t, ok := in.GetMTime(); ok {
		req.Valid |= wire.SetMtime
		req.MtimeNs = t.UnixNano()
	}
	if t, ok := in.GetATime(); ok {
		req.Valid |= wire.SetAtime
		req.AtimeNs = t.UnixNano()
	}
	if errno := n.chownReq(ctx, in, &req); errno != 0 {
		return errno
	}
	if errno := n.flush(ctx); errno != 0 {
		return errno
	}
	var e wire.Entry
	var err error
	if req.Valid == 0 {
		e, err = n.entry(ctx)
	} else {
		before, known := n.root.replica.Stat(p)
		n.root.changeAsked()
		var resp wire.ChangeResp
		resp, err = n.root.owner.SetAttr(ctx, req)
		e = resp.Entry
		if err == nil {
			n.changedHere(known, &before, resp.Pre, &e, req.Valid&wire.SetSize == 0)
		}
	}
	if err != nil {
		return toErrno(err)
	}
	if req.Valid&wire.SetSize != 0 {
		n.mu.Lock()
		n.fileOf().localSize = int64(req.Size)
		n.mu.Unlock()
		n.root.forgetContent(p)
		n.truncatePass(int64(req.Size))
	}
	n.root.replica.Put(p, e)
	n.fill(&e, &out.Attr)
	return 0
}

var _ = (fs.NodeReadlinker)((*Node)(nil))

func (n *Node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	e, err := n.entry(ctx)
	if err != nil {
		return nil, toErrno(err)
	}
	if e.Mode&wire.ModeTypeMask != wire.ModeSymlink {
		return nil, syscall.EINVAL
	}
	return []byte(e.Target), 0
}

var _ = (fs.NodeStatfser)((*Node)(nil))

// Statfs reports the owner's real capacity, in blocks of the mount's preferred size.
func (n *Node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	n.root.stats.statfs.Add(0)
	n.root.stats.roundTrips.Add(1)
	st, err := n.root.owner.Statfs(ctx)
	if err != nil {
		return toErrno(err)
	}
	bs := uint64(n.root.opts.Blksize)
	scale := func(blocks uint64) uint64 { return blocks * st.Bsize / bs }
	out.Bsize, out.Frsize = uint32(bs), uint32(bs)
	out.Blocks, out.Bfree, out.Bavail = scale(st.Blocks), scale(st.Bfree), scale(st.Bavail)
	out.Files, out.Ffree = st.Files, st.Ffree
	out.NameLen = st.NameLen
	return 0
}

var _ = (fs.NodeGetxattrer)((*Node)(nil))

func (n *Node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	n.root.stats.xattr.Add(0)
	// Owners serve only the user namespace: any other is not supported, answered here
	// without a round trip. EOPNOTSUPP rather than ENODATA because callers remember it:
	// ls -l asks for every entry's security.selinux and system.posix_acl_access, and after
	// EOPNOTSUPP stops asking for the whole file system (coreutils getfilecon_cache and
	// file_has_acl_cache), where ENODATA cost two FUSE requests per entry. The kernel turns
	// getxattr off for the mount only on ENOSYS, so user.* attributes keep working.
	if !strings.HasPrefix(attr, "user.") {
		return 0, syscall.EOPNOTSUPP
	}
	if _, local := n.localEntry(); local {
		return 0, errNoAttr // a new file has none
	}
	p, done := n.holdPath()
	defer done()
	n.root.stats.roundTrips.Add(1)
	v, err := n.root.owner.GetXattr(ctx, p, attr)
	if err != nil {
		return 0, toErrno(err)
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

var _ = (fs.NodeListxattrer)((*Node)(nil))

func (n *Node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	n.root.stats.xattr.Add(0)
	if _, local := n.localEntry(); local {
		return 0, 0 // a new file has none
	}
	p, done := n.holdPath()
	defer done()
	n.root.stats.roundTrips.Add(1)
	names, err := n.root.owner.ListXattr(ctx, p)
	if err != nil {
		return 0, toErrno(err)
	}
	var b []byte
	for _, name := range names {
		b = append(append(b, name...), 0)
	}
	if len(dest) < len(b) {
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

var _ = (fs.NodeSetxattrer)((*Node)(nil))

func (n *Node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	n.root.stats.xattr.Add(int64(len(data)))
	if !strings.HasPrefix(attr, "user.") {
		return syscall.EOPNOTSUPP
	}
	if errno := n.ensureCreated(ctx); errno != 0 {
		return xattrCreateErrno(errno)
	}
	p, done := n.holdPath()
	defer done()
	n.root.stats.roundTrips.Add(1)
	return toErrno(n.root.owner.SetXattr(ctx, p, attr, data, flags))
}

// xattrCreateErrno is the answer of an xattr call on a file created here whose creation on
// the owner failed. EEXIST says an exclusive open's name was taken on the owner before the
// file reached it (create.go): the file the descriptor names exists nowhere. From setxattr
// it would read as XATTR_CREATE's answer, "the attribute exists", even without that flag;
// ESTALE says the file is gone, as NFS does, and makes the kernel walk a path given to
// setxattr(2) again, to the file that holds the name now.
func xattrCreateErrno(errno syscall.Errno) syscall.Errno {
	if errno == syscall.EEXIST {
		return syscall.ESTALE
	}
	return errno
}

var _ = (fs.NodeRemovexattrer)((*Node)(nil))

func (n *Node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	n.root.stats.xattr.Add(0)
	if errno := n.ensureCreated(ctx); errno != 0 {
		return xattrCreateErrno(errno)
	}
	p, done := n.holdPath()
	defer done()
	n.root.stats.roundTrips.Add(1)
	return toErrno(n.root.owner.RemoveXattr(ctx, p, attr))
}

// checkName refuses names the owner cannot hold, with the errno a local filesystem gives.
func checkName(names ...string) syscall.Errno {
	for _, name := range names {
		if len(name) > wire.MaxNameLen {
			return syscall.ENAMETOOLONG
		}
	}
	return 0
}

// checkNew refuses a new name in directory n that the owner cannot hold: a name longer than
// NAME_MAX, or one whose path from the share's root is longer than the protocol carries
// (wire.MaxPathLen, PATH_MAX), which ext4 would allow below a working directory. Refused here
// with ENAMETOOLONG, before anything is created, rather than by the owner later with EIO.
func (n *Node) checkNew(name string) syscall.Errno {
	if errno := checkName(name); errno != 0 {
		return errno
	}
	if len(n.childPath(name)) > wire.MaxPathLen {
		return syscall.ENAMETOOLONG
	}
	return 0
}

// childPath is the share path of name in directory n.
func (n *Node) childPath(name string) string { return tree.Join(n.path(), name) }

// childNode returns the Node of the inode the kernel knows for name in directory n, or nil.
func (n *Node) childNode(name string) *Node {
	if c := n.GetChild(name); c != nil {
		if cn, ok := c.Operations().(*Node); ok {
			return cn
		}
	}
	return nil
}

var _ = (fs.NodeAccesser)((*Node)(nil))

// Access answers ENOSYS, which tells the kernel to stop asking: permissions are the owner's to
// enforce, and an ACCESS round trip during a fork's chdir is one of the ways a process
// deadlocks on a FUSE mount it serves itself (go-fuse's "Deadlocks", 1a).
func (n *Node) Access(ctx context.Context, mask uint32) syscall.Errno { return syscall.ENOSYS }
