package share

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/peerfs/peerfs/internal/directio"
	"github.com/peerfs/peerfs/internal/wire"
)

// Files changed in place, as a mount changes them: created (with their first data), written
// at an offset, space reserved or punched (fallocate) and flushed. As in write.go, a method
// that changes the share refuses a read-only share before touching disk, and every name is
// resolved through os.Root. One write at a time per file (lockedWrite). The calls that have
// no portable form are in syscalls_linux.go.

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
		_, unlock, err := s.lockedWrite(op, path, f, off, data)
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
	pre, unlock, err := s.lockedWrite(op, path, f, off, data)
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
func (s *Share) lockedWrite(op, path string, f *os.File, off int64, data []byte) (pre wire.Entry, unlock func(), err error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return wire.Entry{}, nil, fail(op, path, err)
	}
	mu := s.writeLock(entryFromInfo(fi).Ino)
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

// writeLock is the lock of the file with inode number ino in this share.
func (s *Share) writeLock(ino uint64) *sync.Mutex {
	return &s.writeLocks[ino%uint64(len(s.writeLocks))]
}

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

// Syncfs flushes everything written to the file system that holds the share (syncfs(2)), as
// one call however many files changed. Where the system has no syncfs it returns
// errors.ErrUnsupported, and the caller flushes what it changed with Fsync instead.
func (s *Share) Syncfs() error {
	const op = "syncfs"
	if err := s.checkWrite(op, ""); err != nil {
		return err
	}
	d, err := s.root.Open(".")
	if err != nil {
		return fail(op, "", err)
	}
	defer d.Close()
	if err := syncfs(d); err != nil {
		return fail(op, "", err)
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
