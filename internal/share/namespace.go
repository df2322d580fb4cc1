package share

import (
	"fmt"
	"os"
	"syscall"

	"github.com/peerfs/peerfs/internal/rootfs"
	"github.com/peerfs/peerfs/internal/wire"
)

// Names removed, renamed and linked, and special files made. A method that changes the share
// refuses a read-only share before touching disk; every name is resolved relative to its
// directory opened through os.Root by a single plain component (openParent), for the *at
// system calls. renameat2 and mknodat are in syscalls_linux.go.

// Unlink removes the name path, which must not be a directory (EISDIR): a file, a symlink
// (the link itself, never its target) or another non-directory. The name is removed with
// unlinkat relative to its parent directory opened through os.Root (see openParent).
func (s *Share) Unlink(path string) error {
	const op = "unlink"
	if err := s.checkWriteName(op, path, "the share root is a directory", syscall.EISDIR); err != nil {
		return err
	}
	return s.unlinkAt(op, path, 0)
}

// Rmdir removes the empty directory path: ENOTEMPTY if it holds anything, ENOTDIR if it is not
// a directory (a symlink to one included). The share root is never removed (EBUSY, as rmdir(2)
// answers for a mount point).
func (s *Share) Rmdir(path string) error {
	const op = "rmdir"
	if err := s.checkWriteName(op, path, "the share root cannot be removed", syscall.EBUSY); err != nil {
		return err
	}
	defer s.w.release(path)() // a watch's handle would keep the directory pending on Windows
	return s.unlinkAt(op, path, atRemoveDir)
}

func (s *Share) unlinkAt(op, path string, flags int) error {
	d, name, err := s.openParent(op, path)
	if err != nil {
		return err
	}
	defer d.Close()
	err = withFd(d, func(fd int) error { return unlinkat(fd, name, flags) })
	if err != nil {
		return fail(op, path, os.NewSyscallError("unlinkat", err))
	}
	return nil
}

// openParent opens the directory holding path (valid, not the share root) through os.Root and
// returns it with path's last component. Symlinks among the directory's own components are
// followed only while they stay inside the share, as os.Root's own Remove and Rename do. The
// last component is a plain name (CheckPath: no '/', never "." or ".."), and the *at calls made
// with the pair do not follow it, so they can reach nothing but an entry of that directory.
// The caller closes the directory.
func (s *Share) openParent(op, path string) (*os.File, string, error) {
	d, err := s.root.OpenFile(rootName(parentDir(path)), os.O_RDONLY|rootfs.ODirectory, 0)
	if err != nil {
		return nil, "", fail(op, path, err)
	}
	return d, baseName(path), nil
}

// withFd runs fn with f's descriptor, which stays valid for the duration of the call.
func withFd(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// Rename renames from to to, both inside the share, with rename(2) semantics: a file replaces
// a file, a directory replaces an empty directory, and neither name is followed if it is a
// symlink. flags are wire.RenameNoReplace (EEXIST if to exists) or wire.RenameExchange (swap
// the two names, which must both exist), not both. The rename is made relative to the two
// parent directories, each opened through os.Root (see openParent). The share root is neither
// source nor target (EBUSY). Where the system cannot honour a flag the answer is EINVAL, as
// renameat2 gives on a filesystem without it.
func (s *Share) Rename(from, to string, flags uint32) error {
	const op = "rename"
	if err := s.checkWrite(op, from); err != nil {
		return err
	}
	if err := s.checkRenameTarget(op, from, to); err != nil {
		return err
	}
	if flags&^(wire.RenameNoReplace|wire.RenameExchange) != 0 || flags == wire.RenameNoReplace|wire.RenameExchange {
		return fail(op, from, errnoErr(fmt.Sprintf("invalid rename flags %#x", flags), syscall.EINVAL))
	}
	for _, p := range []string{from, to} {
		if p == "" {
			return fail(op, p, errnoErr("the share root cannot be renamed or replaced", syscall.EBUSY))
		}
	}
	fromDir, fromName, err := s.openParent(op, from)
	if err != nil {
		return err
	}
	defer fromDir.Close()
	toDir, toName, err := s.openParent(op, to)
	if err != nil {
		return err
	}
	defer toDir.Close()
	err = withFd(fromDir, func(ffd int) error {
		return withFd(toDir, func(tfd int) error { return renameAt(ffd, fromName, tfd, toName, flags) })
	})
	if err != nil {
		return fail(op, from, os.NewSyscallError("renameat", err))
	}
	return nil
}

// Link makes to a new hard link to the existing from and returns the Entry of to. A symlink at
// from is linked itself, never followed (link(2) semantics). Both names go through os.Root.
// The file is marked as linked through the share (hardlink.go), and a file the share refuses
// to serve for its links is not linked (EACCES).
// A directory cannot be linked (EPERM, as link(2) answers); an existing to is EEXIST.
func (s *Share) Link(from, to string) (wire.Entry, error) {
	const op = "link"
	if err := s.checkWrite(op, from); err != nil {
		return wire.Entry{}, err
	}
	if err := s.checkCreate(op, to); err != nil {
		return wire.Entry{}, err
	}
	if from == "" {
		return wire.Entry{}, fail(op, from, errnoErr("the share root is a directory", syscall.EPERM))
	}
	if to == "" {
		return wire.Entry{}, fail(op, to, errnoErr("the share root exists", syscall.EEXIST))
	}
	// A file the share may not serve must not become one it serves by being linked again.
	if fi, err := s.root.Lstat(from); err == nil {
		if err := s.checkLinks(op, from, nil, fi); err != nil {
			return wire.Entry{}, err
		}
	}
	if err := s.root.Link(from, to); err != nil {
		return wire.Entry{}, fail(op, to, err)
	}
	s.markLinked(to)
	return s.lstat(op, to)
}

// Mknod makes a FIFO, a Unix socket or a device node at the free name path (not the root),
// as mknod(2) does, relative to its parent opened through os.Root (openParent), and returns
// its Entry. mode holds the wire type bits and the permission bits (the owner's umask
// applies; set-id bits as fileMode allows). A FIFO or socket made through a mount is a local
// object of each machine, as on NFS: its data never crosses the link. A device node needs a
// privileged share (EPERM otherwise, as mknod(2) answers a user without CAP_MKNOD) and is then
// the owner's system's to allow.
func (s *Share) Mknod(path string, mode uint32, rdev uint64) (wire.Entry, error) {
	const op = "mknod"
	if err := s.checkWriteName(op, path, "the share root exists", syscall.EEXIST); err != nil {
		return wire.Entry{}, err
	}
	// POSIX's type and mode bits, the same on Linux, macOS and the BSDs (mknodAt's systems).
	const (
		sIFIFO, sIFCHR, sIFBLK, sIFSOCK = 0o010000, 0o020000, 0o060000, 0o140000
		sISUID, sISGID, sISVTX          = 0o4000, 0o2000, 0o1000
	)
	var kind uint32
	switch mode & wire.ModeTypeMask {
	case wire.ModeFIFO:
		kind = sIFIFO
	case wire.ModeSocket:
		kind = sIFSOCK
	case wire.ModeChar, wire.ModeBlock:
		if !s.privileged {
			return wire.Entry{}, fail(op, path, errnoErr("share "+s.name+" lets no peer make device nodes: its owner can "+
				"allow it (peerfs share add --privileged)", syscall.EPERM))
		}
		kind = sIFCHR
		if mode&wire.ModeTypeMask == wire.ModeBlock {
			kind = sIFBLK
		}
	default:
		return wire.Entry{}, fail(op, path, errnoErr(fmt.Sprintf("mknod makes no file of type %#o", mode&wire.ModeTypeMask), syscall.EINVAL))
	}
	perm := uint32(fileMode(mode, false).Perm())
	if mode&0o1000 != 0 {
		perm |= sISVTX
	}
	if s.privileged {
		perm |= mode & (sISUID | sISGID)
	}
	d, name, err := s.openParent(op, path)
	if err != nil {
		return wire.Entry{}, err
	}
	defer d.Close()
	err = withFd(d, func(fd int) error { return mknodAt(fd, name, kind|perm, rdev) })
	if err != nil {
		return wire.Entry{}, fail(op, path, os.NewSyscallError("mknodat", err))
	}
	return s.lstat(op, path)
}
