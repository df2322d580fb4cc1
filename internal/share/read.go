package share

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"syscall"

	"github.com/peerfs/peerfs/internal/rootfs"
	"github.com/peerfs/peerfs/internal/wire"
)

// Stat returns the attributes of path with lstat semantics: a symlink is described, not
// followed, and its Target is filled in. Name is empty. The path is resolved through os.Root;
// symlinks in its directory components are followed only while they stay inside the share.
func (s *Share) Stat(path string) (wire.Entry, error) {
	const op = "stat"
	if err := check(op, path); err != nil {
		return wire.Entry{}, err
	}
	return s.lstat(op, path)
}

// lstat describes path, which must already be valid, without following a final symlink.
func (s *Share) lstat(op, path string) (wire.Entry, error) {
	fi, err := s.root.Lstat(rootName(path))
	if err != nil {
		return wire.Entry{}, fail(op, path, err)
	}
	e := entryFromInfo(fi)
	if e.IsSymlink() {
		target, err := s.root.Readlink(rootName(path))
		if err != nil {
			return wire.Entry{}, fail(op, path, err)
		}
		e.Target = target
	}
	return e, nil
}

// ReadDir lists the directory at path: every entry with its attributes (lstat semantics, as
// Stat), Name set to the base name, sorted by name. The directory and every entry are resolved
// through os.Root; a symlink to a directory outside the share is refused, not listed.
func (s *Share) ReadDir(path string) ([]wire.Entry, error) {
	const op = "readdir"
	if err := check(op, path); err != nil {
		return nil, err
	}
	// O_DIRECTORY makes the kernel refuse a non-directory (ENOTDIR) before opening it, so a FIFO
	// or device under the name is never opened.
	d, err := s.root.OpenFile(rootName(path), os.O_RDONLY|rootfs.ODirectory, 0)
	if err != nil {
		return nil, fail(op, path, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fail(op, path, err)
	}
	slices.Sort(names)
	list := make([]wire.Entry, 0, len(names))
	for _, name := range names {
		e, err := s.lstat(op, join(path, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the directory was read
		}
		if err != nil {
			return nil, err
		}
		e.Name = name
		list = append(list, e)
	}
	return list, nil
}

// OpenRead opens the regular file at path for reading and returns it with its attributes (Name
// empty). Symlinks are followed only while they stay inside the share (os.Root); a directory
// gives EISDIR and any other non-regular file EINVAL. The caller closes the file.
func (s *Share) OpenRead(path string) (*os.File, wire.Entry, error) {
	const op = "open"
	if err := check(op, path); err != nil {
		return nil, wire.Entry{}, err
	}
	f, err := s.openRegular(op, path, rootName(path), os.O_RDONLY)
	if err != nil {
		return nil, wire.Entry{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, wire.Entry{}, fail(op, path, err)
	}
	return f, entryFromInfo(fi), nil
}

// StatFollow returns the attributes of what OpenRead(path) would open now: a final symlink is
// followed, as long as it stays inside the share. A sender compares them with those of the
// file it sent to tell whether the file changed or was replaced meanwhile.
func (s *Share) StatFollow(path string) (wire.Entry, error) {
	const op = "stat"
	if err := check(op, path); err != nil {
		return wire.Entry{}, err
	}
	fi, err := s.root.Stat(rootName(path))
	if err != nil {
		return wire.Entry{}, fail(op, path, err)
	}
	return entryFromInfo(fi), nil
}

// openRegular opens name (an os.Root name derived from the valid share path path, which errors
// report) and returns it only if it is a regular file, and one the share may serve if it has
// several hard links (checkLinks). O_NONBLOCK keeps a FIFO from blocking the open and O_NOCTTY keeps a terminal
// from becoming the daemon's controlling terminal; O_NONBLOCK is cleared once the file is known
// to be regular, so callers get an ordinary blocking file.
func (s *Share) openRegular(op, path, name string, flag int) (*os.File, error) {
	f, err := s.root.OpenFile(name, flag|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fail(op, path, err)
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case fi.IsDir():
		err = errnoErr("a directory cannot be read as a file", syscall.EISDIR)
	case !fi.Mode().IsRegular():
		err = errnoErr(fmt.Sprintf("not a regular file (%v)", fi.Mode().Type()), syscall.EINVAL)
	default:
		if err = s.checkLinks(op, path, f, fi); err != nil {
			f.Close()
			return nil, err
		}
		err = setBlocking(f)
	}
	if err != nil {
		f.Close()
		return nil, fail(op, path, err)
	}
	return f, nil
}

// ReadAt reads into b from the wire offset off of f, a file OpenRead returned. An offset of 2^63 or more, which no file can
// reach and which an int64 would turn negative, is EINVAL, as pread(2) answers for a negative
// offset (os.File.ReadAt would fail with a plain error that maps to EIO).
func ReadAt(f *os.File, b []byte, off uint64) (int, error) {
	if off > math.MaxInt64 {
		return 0, errnoErr("offset beyond the largest file", syscall.EINVAL)
	}
	return f.ReadAt(b, int64(off))
}

// setBlocking clears O_NONBLOCK on f's descriptor.
func setBlocking(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = setNonblock(fd, false) }); err != nil {
		return err
	}
	return serr
}

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

// Statfs describes the filesystem that holds the share, as statfs(2) reports it for the
// share's folder. Bsize is the unit of the block counts.
func (s *Share) Statfs() (wire.Statfs, error) {
	const op = "statfs"
	d, err := s.root.OpenFile(".", os.O_RDONLY|rootfs.ODirectory, 0)
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
