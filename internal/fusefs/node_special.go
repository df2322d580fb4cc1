package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/peerfs/peerfs/internal/wire"
)

var _ = (fs.NodeMknoder)((*Node)(nil))

// Mknod makes a FIFO, a Unix socket (bind(2) in the mount comes here) or a device node on the
// owner. The kernel serves FIFOs and sockets of a FUSE mount itself, so each is a local
// object of the machine that opens it, as on NFS: nothing written to one crosses the link.
// Device nodes need a privileged share (the owner answers EPERM otherwise).
func (n *Node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := checkName(name); errno != 0 {
		return nil, errno
	}
	n.root.stats.mknod.Add(0)
	var kind uint32
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO:
		kind = wire.ModeFIFO
	case syscall.S_IFSOCK:
		kind = wire.ModeSocket
	case syscall.S_IFCHR:
		kind = wire.ModeChar
	case syscall.S_IFBLK:
		kind = wire.ModeBlock
	case syscall.S_IFREG, 0:
		kind = wire.ModeRegular // mknod(2) of a regular file reaches FUSE as MKNOD too
	default:
		return nil, syscall.EINVAL
	}
	p := n.childPath(name)
	if _, found, listed := n.root.replica.Lookup(n.path(), name); listed && found {
		return nil, syscall.EEXIST // known here: no round trip
	}
	n.root.stats.roundTrips.Add(1)
	var e wire.Entry
	var err error
	if kind == wire.ModeRegular {
		e, err = n.root.owner.Create(ctx, p, mode&0o7777, wire.CreateExclusive)
	} else {
		e, err = n.root.owner.Mknod(ctx, p, kind|mode&0o7777, uint64(rdev))
	}
	if err != nil {
		n.root.nameTaken(p, err)
		return nil, toErrno(err)
	}
	n.giveToCaller(ctx, p, &e)
	n.createsOK.Store(true)
	n.root.replica.Put(p, e)
	return n.newChild(ctx, &e, out), 0
}
