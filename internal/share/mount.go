package share

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/peerfs/peerfs/internal/directio"
	"github.com/peerfs/peerfs/internal/wire"
)

// The operations a mount needs beyond direct transfer: files created and written in place,
// names removed, renamed and linked, extended attributes, space reservation, flushing, capacity
// and small files inlined in listings. As in write.go, a method that changes the share refuses
// a read-only share before touching disk, and every name is resolved through os.Root or, for
// the *at system calls, relative to a directory opened through it by a single plain component.
// The calls that have no portable form (renameat2, statfs, xattrs, fallocate) are in
// mount_linux.go.

// inlineBudget bounds the file contents one READDIR reply inlines in all (4 MiB): the listing
// is built whole before its first frame leaves, and a peer may have 128 requests in flight
// (rpc's serving limit), so this keeps a directory of many small files from costing the owner
// more than 512 MiB. Entries past the budget are listed without data.
const inlineBudget = 4 << 20

// ReadDirInline lists the directory at path as ReadDir does and inlines the whole content of
// each regular file of at most inlineMax bytes (capped at wire.MaxInline; 0 or less: none)
// in its Entry, setting HasData. The file is opened through os.Root and its attributes are
// taken again from the open file, so Size always equals len(Data). A file that cannot be read,
// was replaced since it was listed, or changed size while it was read is listed without data.
func (s *Share) ReadDirInline(path string, inlineMax int) ([]wire.Entry, error) {
	list, err := s.ReadDir(path)
	if err != nil || inlineMax <= 0 {
		return list, err
	}
	inlineMax = min(inlineMax, wire.MaxInline)
	budget := inlineBudget
	for i := range list {
		e := &list[i]
		if !e.IsRegular() || e.Size > uint64(inlineMax) || int(e.Size) > budget {
			continue
		}
		if e.Size == 0 {
			e.HasData = true // nothing to read: empty when it was listed
			continue
		}
		s.inline(join(path, e.Name), e, inlineMax)
		budget -= len(e.Data)
	}
	return list, nil
}

// inline reads the regular file at path (valid) into e if it is still the file e describes
// and holds at most max bytes; otherwise e is left as it is.
func (s *Share) inline(path string, e *wire.Entry, max int) {
	// A listing reads ahead of any reader: it must not move the owner's atimes.
	f, err := s.openRegular("readdir", path, path, os.O_RDONLY|oNoatime)
	if err != nil && oNoatime != 0 {
		f, err = s.openRegular("readdir", path, path, os.O_RDONLY) // O_NOATIME needs file ownership
	}
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return
	}
	now := entryFromInfo(fi)
	if now.Ino != e.Ino || now.Size > uint64(max) {
		return
	}
	// One byte more than the size: a file that grew since the fstat fills it and is skipped.
	buf := make([]byte, now.Size+1)
	n, _ := io.ReadFull(f, buf)
	if uint64(n) != now.Size {
		return
	}
	now.Name = e.Name
	now.Data, now.HasData = buf[:n], true
	*e = now
}

// Create creates the regular file path with the permission bits mode and returns its Entry.
// Set-user-ID, set-group-ID and sticky are dropped (fileMode); the owner's umask does not
// apply: the mount's kernel applied its caller's umask to mode, and a new file has exactly the
// mode it would have on a local disk (0000 stays 0000). Without wire.CreateExclusive an existing regular file is opened instead, and
// emptied with wire.CreateTruncate; a final symlink is then followed only while it stays inside
// the share, so a dangling link inside creates its target, as open(2) with O_CREAT would. With
// CreateExclusive any existing name, a symlink included, is EEXIST. A directory at path is
// EISDIR and any other non-regular file EINVAL.
func (s *Share) Create(path string, mode uint32, flags uint32) (wire.Entry, error) {
	return s.CreateWith(wire.CreateReq{Path: path, Mode: mode, Flags: flags})
}

// CreateWith is Create as req asks (req.Share is not looked at): with wire.CreateWithData
// followed by a write of req.Data at req.Offset to the file it opened, with
// wire.CreateSetTimes by setting its times. A mount that created a file locally sends its
// creation with its first contents: one round trip where a CREATE and a WRITE would take two.
// The reply is the file as it then is.
func (s *Share) CreateWith(req wire.CreateReq) (wire.Entry, error) {
	const op = "create"
	path, mode, flags, off, data := req.Path, req.Mode, req.Flags, int64(req.Offset), req.Data
	if err := s.checkCreate(op, path); err != nil {
		return wire.Entry{}, err
	}
	if path == "" {
		return wire.Entry{}, fail(op, path, errnoErr("the share root is a directory", syscall.EISDIR))
	}
	if flags&^(wire.CreateExclusive|wire.CreateTruncate|wire.CreateWithData|wire.CreateSetTimes) != 0 {
		return wire.Entry{}, fail(op, path, errnoErr(fmt.Sprintf("unknown create flags %#x", flags), syscall.EINVAL))
	}
	if err := checkRange(op, path, off, int64(len(data))); err != nil {
		return wire.Entry{}, err
	}
	flag := os.O_WRONLY | os.O_CREATE
	if flags&wire.CreateTruncate != 0 {
		flag |= os.O_TRUNC
	}
	// Exclusive first, so the owner knows whether this call made the file: only a new file
	// takes the mode asked for.
	perm := fileMode(mode, false)
	f, err := s.openRegularPerm(op, path, flag|os.O_EXCL, perm)
	created := err == nil
	if errors.Is(err, fs.ErrExist) && flags&wire.CreateExclusive == 0 {
		f, err = s.openRegularPerm(op, path, flag, perm)
	}
	if err != nil {
		return wire.Entry{}, err
	}
	if created {
		if err := exactMode(f, perm); err != nil {
			f.Close()
			return wire.Entry{}, fail(op, path, err)
		}
	}
	if len(data) > 0 {
		_, unlock, err := lockedWrite(op, path, f, off, data)
		if err != nil {
			return wire.Entry{}, err
		}
		defer unlock()
	}
	if flags&wire.CreateSetTimes != 0 {
		if err := futimes(f, time.Unix(0, req.AtimeNs), time.Unix(0, req.MtimeNs)); err != nil {
			f.Close()
			return wire.Entry{}, fail(op, path, err)
		}
	}
	return s.closeWithEntry(op, path, f)
}

// Write writes data at offset off of the existing regular file path and returns the file's
// Entry after the write and its state just before (wire.ChangeResp). The file is opened through os.Root for this one write (a final symlink
// is followed only inside the share) and closed before the reply, so a rename or unlink of path
// never meets a descriptor kept behind it. A directory is EISDIR, another non-regular file
// EINVAL; an offset past what the owner can address is EFBIG.
func (s *Share) Write(path string, off int64, data []byte) (wire.ChangeResp, error) {
	const op = "write"
	if err := s.checkWrite(op, path); err != nil {
		return wire.ChangeResp{}, err
	}
	if err := checkRange(op, path, off, int64(len(data))); err != nil {
		return wire.ChangeResp{}, err
	}
	f, err := s.openRegular(op, path, rootName(path), os.O_WRONLY)
	if err != nil {
		return wire.ChangeResp{}, err
	}
	pre, unlock, err := lockedWrite(op, path, f, off, data)
	if err != nil {
		return wire.ChangeResp{}, err
	}
	defer unlock()
	e, err := s.closeWithEntry(op, path, f)
	return wire.ChangeResp{Entry: e, Pre: pre.State()}, err
}

// lockedWrite takes the write lock of the open file f (of path), then writes data at off,
// and returns the file as it was just before, and unlock, to call once the file's state
// after the write is read. On failure f is closed and the lock released.
//
// One write at a time per file, so that each reply's states before and after bracket this
// write alone (a change made elsewhere between two of them shows, fusefs/pages.go), and the
// owner's watcher describes the file between writes (watch.Hub.Settle). The kernel
// serialises writes to one file anyway.
func lockedWrite(op, path string, f *os.File, off int64, data []byte) (pre wire.Entry, unlock func(), err error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return wire.Entry{}, nil, fail(op, path, err)
	}
	mu := lockFor(entryFromInfo(fi).Ino)
	mu.Lock()
	if fi, err = f.Stat(); err != nil {
		mu.Unlock()
		f.Close()
		return wire.Entry{}, nil, fail(op, path, err)
	}
	if len(data) > 0 {
		// A large aligned write to a range nobody has cached goes straight to the disk
		// (directio): a file copied into a mount costs the owner no page-cache churn.
		w := directio.NewWriter(f)
		_, err := w.WriteAt(data, off)
		w.Close()
		if err != nil {
			mu.Unlock()
			f.Close()
			return wire.Entry{}, nil, fail(op, path, err)
		}
	}
	return entryFromInfo(fi), mu.Unlock, nil
}

// writeLocks serialise WRITEs and SETATTRs of one file (by inode number; files that share a
// stripe wait for each other too, which costs little).
var writeLocks [256]sync.Mutex

func lockFor(ino uint64) *sync.Mutex { return &writeLocks[ino%uint64(len(writeLocks))] }

// checkRange refuses a negative offset (EINVAL) and a range whose end an int64 cannot hold
// (EFBIG, as write(2) past the largest file).
func checkRange(op, path string, off, n int64) error {
	switch {
	case off < 0 || n < 0:
		return fail(op, path, errnoErr("negative offset or length", syscall.EINVAL))
	case off > math.MaxInt64-n:
		return fail(op, path, errnoErr("range beyond the largest file", syscall.EFBIG))
	}
	return nil
}

// closeWithEntry describes the open file f, which was opened for path, and closes it; an error
// of the close (a delayed write error on a network filesystem) fails the call.
func (s *Share) closeWithEntry(op, path string, f *os.File) (wire.Entry, error) {
	fi, err := f.Stat()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return wire.Entry{}, fail(op, path, err)
	}
	return entryFromInfo(fi), nil
}

// exactMode gives the open file f, just created, the permission bits perm where the owner's
// umask took some away, keeping a set-group-ID bit the file system gave it (a directory
// inherits it from a set-group-ID parent).
func exactMode(f *os.File, perm fs.FileMode) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	want := perm | fi.Mode()&fs.ModeSetgid
	if fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) == want {
		return nil
	}
	return f.Chmod(want)
}

// openRegularPerm is openRegular for an open that may create path (valid, not the root) with
// the permission bits perm.
func (s *Share) openRegularPerm(op, path string, flag int, perm fs.FileMode) (*os.File, error) {
	// O_TRUNC waits for checkLinks: a file the share may not serve must not be emptied.
	trunc := flag&os.O_TRUNC != 0
	f, err := s.root.OpenFile(path, flag&^os.O_TRUNC|syscall.O_NONBLOCK|syscall.O_NOCTTY, perm)
	if err != nil {
		return nil, fail(op, path, err)
	}
	if err := checkRegular(f); err != nil {
		f.Close()
		return nil, fail(op, path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fail(op, path, err)
	}
	if err := s.checkLinks(op, path, f, fi); err != nil {
		f.Close()
		return nil, err
	}
	if trunc {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, fail(op, path, err)
		}
	}
	return f, nil
}

// checkRegular fails unless f is a regular file, and then clears O_NONBLOCK on it.
func checkRegular(f *os.File) error {
	fi, err := f.Stat()
	switch {
	case err != nil:
		return err
	case fi.IsDir():
		return errnoErr("a directory cannot be written as a file", syscall.EISDIR)
	case !fi.Mode().IsRegular():
		return errnoErr(fmt.Sprintf("not a regular file (%v)", fi.Mode().Type()), syscall.EINVAL)
	}
	return setBlocking(f)
}

// Unlink removes the name path, which must not be a directory (EISDIR): a file, a symlink
// (the link itself, never its target) or another non-directory. The name is removed with
// unlinkat relative to its parent directory opened through os.Root (see openParent).
func (s *Share) Unlink(path string) error {
	const op = "unlink"
	if err := s.checkWrite(op, path); err != nil {
		return err
	}
	if path == "" {
		return fail(op, path, errnoErr("the share root is a directory", syscall.EISDIR))
	}
	return s.unlinkAt(op, path, 0)
}

// Rmdir removes the empty directory path: ENOTEMPTY if it holds anything, ENOTDIR if it is not
// a directory (a symlink to one included). The share root is never removed (EBUSY, as rmdir(2)
// answers for a mount point).
func (s *Share) Rmdir(path string) error {
	const op = "rmdir"
	if err := s.checkWrite(op, path); err != nil {
		return err
	}
	if path == "" {
		return fail(op, path, errnoErr("the share root cannot be removed", syscall.EBUSY))
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
	d, err := s.root.OpenFile(rootName(parentDir(path)), os.O_RDONLY|oDirectory, 0)
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

// Fsync flushes path (a regular file or a directory; the share root for "") to stable storage
// on the owner: its data only with dataOnly (fdatasync), else data and metadata. A final symlink
// is followed only inside the share. A read-only share holds nothing of the peer's to flush
// and refuses (EROFS) without touching disk; another non-regular file is EINVAL.
func (s *Share) Fsync(path string, dataOnly bool) error {
	const op = "fsync"
	if err := s.checkWrite(op, path); err != nil {
		return err
	}
	// Read-only is enough to flush; a file its owner may only write is opened for writing.
	f, err := s.root.OpenFile(rootName(path), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if errors.Is(err, fs.ErrPermission) {
		if wf, werr := s.root.OpenFile(rootName(path), os.O_WRONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0); werr == nil {
			f, err = wf, nil
		}
	}
	if err != nil {
		return fail(op, path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.IsDir() && !fi.Mode().IsRegular():
		err = errnoErr(fmt.Sprintf("not a regular file or directory (%v)", fi.Mode().Type()), syscall.EINVAL)
	case dataOnly:
		err = fdatasync(f)
	default:
		err = f.Sync()
	}
	if err != nil {
		return fail(op, path, err)
	}
	return nil
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
	if err := s.checkWrite(op, path); err != nil {
		return wire.Entry{}, err
	}
	if path == "" {
		return wire.Entry{}, fail(op, path, errnoErr("the share root exists", syscall.EEXIST))
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

// xattrPrefix is the one extended attribute namespace a share serves. The others hold the
// owner's security labels, ACLs, capabilities and administrator data (security., system.,
// trusted.), which mean nothing on another device and which no peer may set.
const xattrPrefix = "user."

// checkXattrName refuses a name outside the user namespace with EOPNOTSUPP, which Linux gives
// for a namespace a filesystem does not support, and a name with nothing after the prefix or
// with a NUL byte with EINVAL.
func checkXattrName(op, path, name string) error {
	switch {
	case !strings.HasPrefix(name, xattrPrefix):
		return fail(op, path, errnoErr(fmt.Sprintf("attribute %q: only the %q namespace is shared", name, xattrPrefix), syscall.EOPNOTSUPP))
	case name == xattrPrefix || strings.IndexByte(name, 0) >= 0 || len(name) > wire.MaxXattrName:
		return fail(op, path, errnoErr(fmt.Sprintf("invalid attribute name %q", name), syscall.EINVAL))
	case isReservedXattr(name):
		return fail(op, path, errnoErr(fmt.Sprintf("attribute %q: the %q names are the share's own", name, reservedXattrs), syscall.EPERM))
	}
	return nil
}

// errNoXattrs marks a name whose type carries no user attributes: Linux allows them on regular
// files and directories only, and answers ENODATA to a read and EPERM to a change on anything
// else (a symlink, a FIFO).
var errNoXattrs = errors.New("user attributes exist only on regular files and directories")

// openXattr opens path (valid) to read or change its extended attributes through the returned
// descriptor. The name is looked at with lstat first: a symlink is answered for itself, as
// lgetxattr does, so it is never followed and a special file is never opened; both give
// errNoXattrs. The open itself goes through os.Root with O_NONBLOCK and O_NOCTTY, and what it
// opened is checked again.
func (s *Share) openXattr(op, path string) (*os.File, error) {
	name := rootName(path)
	fi, err := s.root.Lstat(name)
	if err != nil {
		return nil, fail(op, path, err)
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return nil, errNoXattrs
	}
	f, err := s.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fail(op, path, err)
	}
	if fi, err = f.Stat(); err != nil || (!fi.IsDir() && !fi.Mode().IsRegular()) {
		f.Close()
		if err != nil {
			return nil, fail(op, path, err)
		}
		return nil, errNoXattrs
	}
	if err := s.checkLinks(op, path, f, fi); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// GetXattr returns the value of the extended attribute name ("user." namespace only) of path,
// itself if it is a symlink. A missing attribute is ENODATA.
func (s *Share) GetXattr(path, name string) ([]byte, error) {
	const op = "getxattr"
	if err := check(op, path); err != nil {
		return nil, err
	}
	if isReservedXattr(name) {
		return nil, fail(op, path, errnoErr("no such attribute", wire.ENODATA))
	}
	if err := checkXattrName(op, path, name); err != nil {
		return nil, err
	}
	f, err := s.openXattr(op, path)
	if errors.Is(err, errNoXattrs) {
		return nil, fail(op, path, errnoErr(errNoXattrs.Error(), wire.ENODATA))
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	v, err := getXattr(f, name)
	if err != nil {
		return nil, fail(op, path, err)
	}
	return v, nil
}

// ListXattr returns the names of path's extended attributes in the "user." namespace, in the
// order the owner's filesystem gives them; a symlink or special file has none.
func (s *Share) ListXattr(path string) ([]string, error) {
	const op = "listxattr"
	if err := check(op, path); err != nil {
		return nil, err
	}
	f, err := s.openXattr(op, path)
	if errors.Is(err, errNoXattrs) {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	all, err := listXattr(f)
	if err != nil {
		return nil, fail(op, path, err)
	}
	names := []string{}
	for _, n := range all {
		if strings.HasPrefix(n, xattrPrefix) && !isReservedXattr(n) {
			names = append(names, n)
		}
	}
	return names, nil
}

// SetXattr sets the extended attribute name ("user." namespace only) of path to value. flags
// are wire.XattrCreate (EEXIST if it exists) or wire.XattrReplace (ENODATA if it does not). A
// symlink or special file takes none (EPERM).
func (s *Share) SetXattr(path, name string, value []byte, flags uint32) error {
	const op = "setxattr"
	if err := s.checkWrite(op, path); err != nil {
		return err
	}
	if err := checkXattrName(op, path, name); err != nil {
		return err
	}
	if flags&^(wire.XattrCreate|wire.XattrReplace) != 0 || flags == wire.XattrCreate|wire.XattrReplace {
		return fail(op, path, errnoErr(fmt.Sprintf("invalid setxattr flags %#x", flags), syscall.EINVAL))
	}
	if len(value) > wire.MaxXattrValue {
		return fail(op, path, errnoErr("attribute value too large", syscall.E2BIG))
	}
	f, err := s.openXattr(op, path)
	if errors.Is(err, errNoXattrs) {
		return fail(op, path, errnoErr(errNoXattrs.Error(), syscall.EPERM))
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := setXattr(f, name, value, flags); err != nil {
		return fail(op, path, err)
	}
	return nil
}

// RemoveXattr removes the extended attribute name ("user." namespace only) of path; a missing
// one is ENODATA, and a symlink or special file is EPERM.
func (s *Share) RemoveXattr(path, name string) error {
	const op = "removexattr"
	if err := s.checkWrite(op, path); err != nil {
		return err
	}
	if err := checkXattrName(op, path, name); err != nil {
		return err
	}
	f, err := s.openXattr(op, path)
	if errors.Is(err, errNoXattrs) {
		return fail(op, path, errnoErr(errNoXattrs.Error(), syscall.EPERM))
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := removeXattr(f, name); err != nil {
		return fail(op, path, err)
	}
	return nil
}

// Fallocate applies fallocate(2) with mode (Linux FALLOC_FL_* bits: keep size, punch hole,
// collapse, zero, insert, unshare and write-zeroes ranges; any other bit is EOPNOTSUPP) to the
// range [off, off+length) of the regular file path, opened through os.Root, and returns its
// Entry after the change. A filesystem without the mode answers EOPNOTSUPP.
func (s *Share) Fallocate(path string, mode uint32, off, length int64) (wire.Entry, error) {
	const op = "fallocate"
	if err := s.checkWrite(op, path); err != nil {
		return wire.Entry{}, err
	}
	if mode&^fallocKnown != 0 {
		return wire.Entry{}, fail(op, path, errnoErr(fmt.Sprintf("unsupported fallocate mode %#x", mode), syscall.EOPNOTSUPP))
	}
	if err := checkRange(op, path, off, length); err != nil {
		return wire.Entry{}, err
	}
	f, err := s.openRegular(op, path, rootName(path), os.O_WRONLY)
	if err != nil {
		return wire.Entry{}, err
	}
	if err := fallocate(f, mode, off, length); err != nil {
		f.Close()
		return wire.Entry{}, fail(op, path, err)
	}
	return s.closeWithEntry(op, path, f)
}

// Statfs describes the filesystem that holds the share, as statfs(2) reports it for the
// share's folder. Bsize is the unit of the block counts.
func (s *Share) Statfs() (wire.Statfs, error) {
	const op = "statfs"
	d, err := s.root.OpenFile(".", os.O_RDONLY|oDirectory, 0)
	if err != nil {
		return wire.Statfs{}, fail(op, "", err)
	}
	defer d.Close()
	st, err := statfs(d)
	if err != nil {
		return wire.Statfs{}, fail(op, "", err)
	}
	return st, nil
}
