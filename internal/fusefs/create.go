package fusefs

// Files created here, on the owner later.
//
// A file created through the mount in a directory the replica lists, under a name it knows
// to be free, is created on the owner only when its first data is sent, at the close, fsync,
// timer or write-behind that sends it: that CREATE carries the data (wire.CreateWithData), so
// creating, writing and closing a small file costs one round trip instead of two. git
// checkout, tar, cp -r and compilers create files this way by the thousand. Close-to-open
// consistency holds as before: when close returns, the file and its data are on the owner.
//
// Until then the file lives in the mount. Its Node holds a provisional entry with an inode
// number from a range the owner's filesystems do not hand out (localInoBase and up), and every
// operation that must reach the owner with its path creates it there first (ensureCreated).
// The file keeps the provisional number for its life in the mount: once it is on the owner,
// the owner's number maps to it (Root.kernelIno), so listings, hard links and lookups after
// the kernel forgot the inode show one file with one number (st_ino must not change under
// git, rsync -H, tar or find -inum). The map loses the entry when the file is unlinked
// through the mount; it lives no longer than the mount (a remount shows the owner's number).
//
// The CREATE carries the open's flags, so it does what the open would have done had it reached
// the owner then. An error the owner gives (an exclusive open's name was taken there
// meanwhile: EEXIST; the share turned read-only: EROFS) comes back at that close, fsync or
// write, never lost (an xattr call answers ESTALE for EEXIST: xattrCreateErrno); the name
// goes from the mount and nothing of the file is sent. So that
// the common refusals come at open, as on a local disk, only directories where the owner
// accepted a CREATE or MKDIR from this mount before are trusted this way (createsOK): the
// first create in a read-only share, or in a directory the owner may not write, goes to the
// owner at once and fails there.

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/peerfs/peerfs/internal/tree"
	"github.com/peerfs/peerfs/internal/wire"
)

// localInoBase starts the inode numbers of files that exist only in this mount so far.
const localInoBase = 1 << 63

// localCreate is a file created through the mount and not yet on the owner.
type localCreate struct {
	entry wire.Entry // what the mount shows until then
	mode  uint32     // permission bits asked for
	// flags are the open's wire.Create* flags: the CREATE sent later does what the open
	// would have done had it reached the owner then (a name taken meanwhile: EEXIST for
	// an exclusive open, opened, or emptied with O_TRUNC, otherwise).
	flags  uint32
	parent *Node
	// maybeSent says an earlier attempt failed without an answer from the owner, which may
	// have created the file: the next attempt must not insist on a new name.
	maybeSent bool
	err       error // the owner refused the creation; final
}

// createLocally answers a create in n of name (at path p) without the owner, when it may: n is
// trusted (createsOK), change events flow, and the replica knows the name is free. ok false
// means the caller must ask the owner.
func (n *Node) createLocally(ctx context.Context, name, p string, flags, mode, cf uint32, out *fuse.EntryOut) (ino *fs.Inode, h fs.FileHandle, fuseFlags uint32, errno syscall.Errno, ok bool) {
	if !n.createsOK.Load() || !n.root.watching.Load() || n.GetChild(name) != nil {
		return nil, nil, 0, 0, false
	}
	if _, found, listed := n.root.replica.Lookup(n.path(), name); !listed || found {
		return nil, nil, 0, 0, false
	}
	now := time.Now().UnixNano()
	e := wire.Entry{Name: name, Mode: wire.ModeRegular | mode&0o777, Nlink: 1,
		AtimeNs: now, MtimeNs: now, CtimeNs: now, Ino: localInoBase + n.root.localInos.Add(1)}
	child := &Node{root: n.root}
	child.creating = &localCreate{entry: e, mode: mode & 0o7777, flags: cf, parent: n}
	ino = n.NewInode(ctx, child, fs.StableAttr{Mode: syscall.S_IFREG, Ino: e.Ino, Gen: n.root.gen.Load()})
	child = ino.Operations().(*Node)
	child.fill(&e, &out.Attr)
	n.localKids.Add(1)
	n.root.replica.Put(p, e)
	n.dirChanged(0, now)
	n.root.stats.localCreates.Add(1)
	if errno = child.reserveOpen(); errno != 0 {
		return ino, nil, 0, errno, true
	}
	h, fuseFlags, errno = child.openHandle(ctx, flags, &e)
	return ino, h, fuseFlags, errno, true
}

// localEntry returns the provisional entry of a file that exists only in this mount.
func (n *Node) localEntry() (wire.Entry, bool) {
	n.createMu.Lock()
	defer n.createMu.Unlock()
	if c := n.creating; c != nil && c.err == nil {
		return c.entry, true
	}
	return wire.Entry{}, false
}

// writePiece sends one piece of the file's data to the owner: a WRITE, or, while the file
// exists only here, the CREATE that carries it, whose reply reads as a WRITE's (the state
// before is the provisional entry's).
func (n *Node) writePiece(ctx context.Context, p string, off int64, data []byte) (wire.ChangeResp, error) {
	n.createMu.Lock()
	c := n.creating
	if c == nil {
		n.createMu.Unlock()
		return n.root.owner.Write(ctx, p, off, data)
	}
	defer n.createMu.Unlock()
	if c.err != nil {
		return wire.ChangeResp{}, c.err
	}
	e, err := n.root.owner.CreateWith(ctx, wire.CreateReq{Path: p, Mode: c.mode,
		Flags: n.createFlags(c) | wire.CreateWithData, Offset: uint64(off), Data: data})
	if err != nil {
		return wire.ChangeResp{}, n.createFailed(c, p, err)
	}
	n.created(c, &e)
	return wire.ChangeResp{Entry: e, Pre: c.entry.State()}, nil
}

// ensureCreated creates the file on the owner, empty, if it exists only here: an operation
// on its path is about to reach the owner. The file keeps the times the mount showed, as it
// would on a local disk.
func (n *Node) ensureCreated(ctx context.Context) syscall.Errno {
	n.createMu.Lock()
	defer n.createMu.Unlock()
	c := n.creating
	if c == nil {
		return 0
	}
	if c.err != nil {
		return toErrno(c.err)
	}
	n.flushStart() // the creation's change event is an echo (pages.go)
	defer n.flushDone()
	p := n.path()
	n.root.changeAsked()
	e, err := n.root.owner.CreateWith(ctx, wire.CreateReq{Path: p, Mode: c.mode, Flags: n.createFlags(c) | wire.CreateSetTimes,
		AtimeNs: c.entry.AtimeNs, MtimeNs: c.entry.MtimeNs})
	if err != nil {
		return toErrno(n.createFailed(c, p, err))
	}
	n.created(c, &e)
	n.wroteState(&e)
	n.ownVersion(version(&e))
	n.root.replica.Put(p, e)
	return 0
}

// ensureChildCreated is ensureCreated for the child name of directory n, if the kernel knows it.
func (n *Node) ensureChildCreated(ctx context.Context, name string) syscall.Errno {
	if n.localKids.Load() == 0 {
		return 0
	}
	if cn := n.childNode(name); cn != nil {
		return cn.ensureCreated(ctx)
	}
	return 0
}

// createFlags are the CREATE flags for c. createMu is held.
func (n *Node) createFlags(c *localCreate) uint32 {
	if c.maybeSent {
		return c.flags &^ wire.CreateExclusive
	}
	return c.flags
}

// created records that the owner holds the file now, as e says. createMu is held.
func (n *Node) created(c *localCreate, e *wire.Entry) {
	n.creating = nil
	n.ownerIno = e.Ino
	c.parent.localKids.Add(-1)
	n.root.aliasIno(e.Ino, n.StableAttr().Ino)
}

// createFailed handles an error of the creation on the owner and returns it. An answer of
// the owner is final: the name goes from the mount and the error is what every later flush
// reports. Without an answer (the link failed), the file stays here for the next try.
// createMu is held.
func (n *Node) createFailed(c *localCreate, p string, err error) error {
	var re *wire.RemoteError
	if !errors.As(err, &re) {
		c.maybeSent = true
		return err
	}
	n.lose(c, err)
	if errno := toErrno(err); errno == syscall.EACCES || errno == syscall.EROFS || errno == syscall.EPERM {
		c.parent.createsOK.Store(false) // ask the owner at once next time
	}
	n.root.log.Warn("a file created through the mount could not be created on the owner; "+
		"its close reports the error and its data is not sent", "path", p, "err", err)
	if e, ok := n.root.replica.Stat(p); ok && e.Ino == c.entry.Ino {
		n.root.replica.Remove(p)
	}
	go n.root.notify(p, true) // not from inside a FUSE operation, which can deadlock
	return err
}

// lose records that the file will never reach the owner, for err. createMu is held.
func (n *Node) lose(c *localCreate, err error) {
	c.err = err
	n.createLost.Store(true)
	c.parent.localKids.Add(-1)
}

// createError returns the owner's refusal to create the file, after which nothing more of it
// is sent: its path may name someone else's file.
func (n *Node) createError() error {
	if !n.createLost.Load() {
		return nil
	}
	n.createMu.Lock()
	defer n.createMu.Unlock()
	return n.creating.err
}

// kernelIno is the inode number the kernel knows for the owner's inode number ino: the
// provisional one while the kernel keeps the inode of a file created here, else ino itself.
func (r *Root) kernelIno(ino uint64) uint64 {
	r.aliasMu.RLock()
	defer r.aliasMu.RUnlock()
	if k, ok := r.aliases[ino]; ok {
		return k
	}
	return ino
}

// aliasIno maps the owner's inode number to the provisional one the kernel knows.
func (r *Root) aliasIno(ownerIno, local uint64) {
	r.aliasMu.Lock()
	if r.aliases == nil {
		r.aliases = map[uint64]uint64{}
	}
	r.aliases[ownerIno] = local
	r.aliasMu.Unlock()
}

// dropAlias forgets the provisional number of file n, created here, once the file is gone
// from the owner, which may give its inode number to another file. Only n's own: the owner
// may have given the number to another file created here already, and that file must keep
// its node (a lookup would otherwise make a second one, and an unlink through the name would
// miss the open one and delete the file under it). Until then the alias outlives the
// kernel's inode, so a file keeps its st_ino for its whole life in the mount.
func (n *Node) dropAlias() {
	n.createMu.Lock()
	ino := n.ownerIno
	n.createMu.Unlock()
	if ino == 0 {
		return
	}
	r := n.root
	r.aliasMu.Lock()
	if r.aliases[ino] == n.StableAttr().Ino {
		delete(r.aliases, ino)
	}
	r.aliasMu.Unlock()
}

var _ = (fs.NodeOnForgetter)((*Node)(nil))

// OnForget: a file that never reached the owner (its every flush failed, and the application
// was told at close) stops counting in its folder once the kernel forgot it.
func (n *Node) OnForget() {
	n.mu.Lock()
	opens := n.opens
	n.mu.Unlock()
	n.createMu.Lock()
	if c := n.creating; c != nil && c.err == nil && opens == 0 {
		n.lose(c, errors.New("forgotten before it reached the owner"))
	}
	n.createMu.Unlock()
}

// listLocalKids adds to a listing of directory n the files created here that the owner does
// not list yet.
func (n *Node) listLocalKids(list, listed []tree.DirEntry) []tree.DirEntry {
	have := make(map[string]bool, len(listed))
	for i := range listed {
		have[listed[i].Name] = true
	}
	for name, c := range n.Children() {
		if cn, ok := c.Operations().(*Node); ok && !have[name] {
			if e, local := cn.localEntry(); local {
				list = append(list, tree.DirEntry{Name: name, Mode: e.Mode, Ino: e.Ino})
			}
		}
	}
	return list
}
