package share

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/peerfs/peerfs/internal/rootfs"
	"github.com/peerfs/peerfs/internal/wire"
)

// Every method here refuses a read-only share before touching disk and resolves every name
// through os.Root, so nothing outside the share is ever created, changed or removed.

// CreatePart opens the temporary file for an upload to path: ".<base>.peerfs-part" in the same
// directory, mode 0600, opened read-write (a resumed upload rehashes its prefix). With resume, an existing part is kept and its size returned
// as offset (the file is positioned there); without, any old part is discarded and an empty one
// created. A fresh part is created with O_EXCL, which os.Root never resolves through a symlink,
// so a link planted under the part name cannot redirect the upload.
func (s *Share) CreatePart(path string, resume bool) (f *os.File, offset int64, err error) {
	const op = "create"
	if err := s.checkCreate(op, path); err != nil {
		return nil, 0, err
	}
	if path == "" {
		return nil, 0, fail(op, path, errnoErr("the share root cannot be replaced", syscall.EISDIR))
	}
	// Refuse now rather than after the whole upload: a directory is never replaced by a file.
	if err := s.notDir(op, path, path, "a directory cannot be replaced by a file"); err != nil {
		return nil, 0, err
	}
	part := partName(path)
	fi, err := s.root.Lstat(part)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, 0, fail(op, path, err)
	case fi.IsDir():
		return nil, 0, fail(op, path, errnoErr("a directory holds the upload's part name "+partBase(part), syscall.EISDIR))
	case resume && fi.Mode().IsRegular():
		return s.resumePart(op, path, part, fi)
	default:
		// An old part not to be resumed, or a link or special file under the reserved name.
		if err := s.root.Remove(part); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, 0, fail(op, path, err)
		}
	}
	f, err = s.root.OpenFile(part, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, 0, fail(op, path, err)
	}
	s.notePart(part)
	return f, 0, nil
}

// resumePart reopens the existing part that lstat described as fi and checks that the file
// opened is that same regular file, not something swapped in since.
func (s *Share) resumePart(op, path, part string, fi fs.FileInfo) (*os.File, int64, error) {
	f, err := s.openRegular(op, path, part, os.O_RDWR)
	if err != nil {
		return nil, 0, err
	}
	cur, err := f.Stat()
	if err == nil && !os.SameFile(fi, cur) {
		err = errnoErr("the upload's part file changed while it was opened; retry", syscall.EAGAIN)
	}
	if err == nil {
		_, err = f.Seek(cur.Size(), io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, 0, fail(op, path, err)
	}
	return f, cur.Size(), nil
}

// CommitPart finishes an upload to path: it sets the part's permission bits (set-id bits are
// dropped, see fileMode) and, unless mtime is zero, its modification time, then renames it over
// path and syncs the directory (the caller synced the part's data, SyncClose), so the file is
// durable under its name when CommitPart returns. A directory at path is refused with EISDIR; so is a part that is not a regular file.
func (s *Share) CommitPart(path string, mode uint32, mtime time.Time) error {
	const op = "commit"
	if err := s.checkWriteName(op, path, "the share root cannot be replaced", syscall.EISDIR); err != nil {
		return err
	}
	part := partName(path)
	fi, err := s.root.Lstat(part)
	if err != nil {
		return fail(op, path, err)
	}
	// Root.Chmod and Chtimes follow a final symlink, so only a regular part is acted on.
	if !fi.Mode().IsRegular() {
		return fail(op, path, errnoErr("the upload's part "+partBase(part)+" is not a regular file", syscall.EINVAL))
	}
	if err := s.notDir(op, path, path, "a directory cannot be replaced by a file"); err != nil {
		return err
	}
	if err := s.root.Chmod(part, s.permFor(mode, false)); err != nil {
		return fail(op, path, err)
	}
	if !mtime.IsZero() {
		if err := s.root.Chtimes(part, time.Time{}, mtime); err != nil {
			return fail(op, path, err)
		}
	}
	if err := s.root.Rename(part, path); err != nil {
		return fail(op, path, err)
	}
	s.forgetPart(part)
	// The new name must survive a power cut before the upload is reported stored.
	if err := s.syncDir(parentDir(path)); err != nil {
		return fail(op, path, err)
	}
	return nil
}

// RemovePart discards the part file of an upload to path. No part is success: the upload is
// gone either way. A directory under the part name is left alone (EISDIR).
func (s *Share) RemovePart(path string) error {
	const op = "remove part"
	if err := s.checkWriteName(op, path, "the share root has no upload part", syscall.EISDIR); err != nil {
		return err
	}
	part := partName(path)
	if err := s.notDir(op, path, part, "a directory holds the upload's part name "+partBase(part)); err != nil {
		return err
	}
	if err := s.root.Remove(part); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(op, path, err)
	}
	s.forgetPart(part)
	return nil
}

// Mkdir creates one directory with the permission bits mode&0777. With wire.NameExclusive in
// flags, a mount's mkdir(2), any existing name is EEXIST and the directory gets mode exactly
// (sticky included; set-group-ID as the file system gives it): the mount's kernel applied its
// caller's umask, not the owner's. Without it, a tree sent, an existing directory is success,
// so a tree can be sent again, an existing non-directory, a symlink included, is EEXIST, and
// the owner's umask applies. The share root always exists.
func (s *Share) Mkdir(path string, mode, flags uint32) error {
	const op = "mkdir"
	if err := s.checkCreate(op, path); err != nil {
		return err
	}
	if path == "" {
		if flags&wire.NameExclusive != 0 {
			return fail(op, path, errnoErr("the share root exists", syscall.EEXIST))
		}
		return nil
	}
	err := s.root.Mkdir(path, fs.FileMode(mode&0o777))
	if err == nil && flags&wire.NameExclusive != 0 {
		err = s.exactDirMode(path, fileMode(mode&0o1777, true))
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrExist) && flags&wire.NameExclusive == 0 {
		if fi, lerr := s.root.Lstat(path); lerr == nil && fi.IsDir() {
			return nil
		}
	}
	return fail(op, path, err)
}

// exactDirMode gives the directory at path, just made, the permission bits perm (exactMode).
func (s *Share) exactDirMode(path string, perm fs.FileMode) error {
	d, err := s.root.OpenFile(path, os.O_RDONLY|rootfs.ODirectory|rootfs.ONoFollow, 0)
	if err != nil {
		return err
	}
	err = exactMode(d, perm)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Symlink creates a symlink at path whose target is stored verbatim. The target is not judged:
// following any link is confined to the share by os.Root. With wire.NameExclusive in flags any
// existing name is EEXIST, as for symlink(2); without it an existing symlink is replaced
// atomically (a new link under a temporary name is renamed over it) and anything else at path
// is refused with EEXIST.
func (s *Share) Symlink(path, target string, flags uint32) error {
	const op = "symlink"
	if err := s.checkCreate(op, path); err != nil {
		return err
	}
	if path == "" {
		return fail(op, path, errnoErr("the share root cannot be replaced", syscall.EEXIST))
	}
	if target == "" {
		return fail(op, path, errnoErr("empty link target", syscall.EINVAL))
	}
	err := s.root.Symlink(target, path)
	if !errors.Is(err, fs.ErrExist) || flags&wire.NameExclusive != 0 {
		if err != nil {
			return fail(op, path, err)
		}
		return nil
	}
	fi, lerr := s.root.Lstat(path)
	if lerr != nil {
		return fail(op, path, lerr)
	}
	if fi.Mode().Type() != fs.ModeSymlink {
		return fail(op, path, err)
	}
	tmp := join(parentDir(path), ".peerfs-link-"+rand.Text())
	if err := s.root.Symlink(target, tmp); err != nil {
		return fail(op, path, err)
	}
	if err := s.root.Rename(tmp, path); err != nil {
		s.root.Remove(tmp)
		return fail(op, path, err)
	}
	return nil
}

// SetAttr applies to req.Path the attributes req.Valid selects and returns the path's Entry
// after the change (req.Share is not consulted: the caller chose this share). In order: the
// size (wire.SetSize: truncate or extend a regular file opened through os.Root, a final symlink
// followed only inside the share), the permission bits (wire.SetMode; set-id bits as fileMode
// allows), then the access and modification times (wire.SetAtime, wire.SetMtime), last so that
// the truncate does not overwrite a time set by the same request. A symlink itself is acted on,
// never its target: its mode is skipped (links have none of their own), its times are set on
// the link where the system allows, else skipped, and a size is refused (EINVAL). A size on a
// directory is EISDIR, on another non-regular file EINVAL, and past what the owner can address
// EFBIG.
func (s *Share) SetAttr(req wire.SetAttrReq) (wire.ChangeResp, error) {
	const op = "setattr"
	path := req.Path
	if err := s.checkWrite(op, path); err != nil {
		return wire.ChangeResp{}, err
	}
	if req.Valid&^(wire.SetMode|wire.SetMtime|wire.SetAtime|wire.SetSize|wire.SetUID|wire.SetGID) != 0 {
		return wire.ChangeResp{}, fail(op, path, errnoErr(fmt.Sprintf("unknown attribute bits %#x", req.Valid), syscall.EINVAL))
	}
	fi, err := s.root.Lstat(rootName(path))
	if err != nil {
		return wire.ChangeResp{}, fail(op, path, err)
	}
	// Like a WRITE, one change of a regular file at a time, bracketed by its state before
	// (Lstat above, again under the lock) and after.
	if fi.Mode().IsRegular() {
		mu := s.writeLock(entryFromInfo(fi).Ino)
		mu.Lock()
		defer mu.Unlock()
		if fi, err = s.root.Lstat(rootName(path)); err != nil {
			return wire.ChangeResp{}, fail(op, path, err)
		}
	}
	// Mode and times are changed by name: a file the share may not serve is refused here too.
	if err := s.checkLinks(op, path, nil, fi); err != nil {
		return wire.ChangeResp{}, err
	}
	pre := entryFromInfo(fi)
	e, err := s.setAttr(op, req, fi)
	return wire.ChangeResp{Entry: e, Pre: pre.State()}, err
}

// setAttr applies req to the path that Lstat described as fi.
func (s *Share) setAttr(op string, req wire.SetAttrReq, fi fs.FileInfo) (wire.Entry, error) {
	path, valid, name := req.Path, req.Valid, rootName(req.Path)
	// A zero time.Time leaves that time as it is, for Root.Chtimes and lutimes alike; no
	// int64 of nanoseconds is the zero time.Time (year 1), so every requested time is applied.
	var atime, mtime time.Time
	if valid&wire.SetAtime != 0 {
		atime = time.Unix(0, req.AtimeNs)
	}
	if valid&wire.SetMtime != 0 {
		mtime = time.Unix(0, req.MtimeNs)
	}
	setTimes := valid&(wire.SetAtime|wire.SetMtime) != 0
	if err := s.chown(op, req, fi); err != nil {
		return wire.Entry{}, err
	}
	if fi.Mode().Type() == fs.ModeSymlink {
		if valid&wire.SetSize != 0 {
			return wire.Entry{}, fail(op, path, errnoErr("a symlink has no content to resize", syscall.EINVAL))
		}
		// Root.Chmod and Root.Chtimes would act on the link's target.
		if setTimes {
			if err := s.lutimes(path, atime, mtime); err != nil {
				return wire.Entry{}, fail(op, path, err)
			}
		}
		return s.lstat(op, path)
	}
	if valid&wire.SetSize != 0 {
		if err := s.truncate(op, path, fi, req.Size); err != nil {
			return wire.Entry{}, err
		}
	}
	if valid&wire.SetMode != 0 {
		if err := s.root.Chmod(name, s.permFor(req.Mode, fi.IsDir())); err != nil {
			return wire.Entry{}, fail(op, path, err)
		}
	}
	if setTimes {
		if err := s.root.Chtimes(name, atime, mtime); err != nil {
			return wire.Entry{}, fail(op, path, err)
		}
	}
	return s.lstat(op, path)
}

// chown applies the owner and group req selects (wire.SetUID, wire.SetGID) to the path that
// Lstat described as fi, itself if it is a symlink. IDs equal to the current ones change
// nothing and succeed, as chown(2) to the current IDs does for the file's owner. A change
// needs a privileged share (EPERM otherwise), and then is the owner's system's to allow: a
// daemon without CAP_CHOWN may only give a file it owns to a group it belongs to.
func (s *Share) chown(op string, req wire.SetAttrReq, fi fs.FileInfo) error {
	if req.Valid&(wire.SetUID|wire.SetGID) == 0 {
		return nil
	}
	cur := entryFromInfo(fi)
	uid, gid := -1, -1
	if req.Valid&wire.SetUID != 0 && req.UID != cur.UID {
		uid = int(req.UID)
	}
	if req.Valid&wire.SetGID != 0 && req.GID != cur.GID {
		gid = int(req.GID)
	}
	if uid < 0 && gid < 0 {
		return nil
	}
	if !s.privileged {
		return fail(op, req.Path, errnoErr("share "+s.name+" lets no peer change owners or groups: its owner can allow it "+
			"(peerfs share add --privileged)", syscall.EPERM))
	}
	if err := s.root.Lchown(rootName(req.Path), uid, gid); err != nil {
		return fail(op, req.Path, err)
	}
	return nil
}

// truncate sets the length of the regular file path, which lstat described as fi.
func (s *Share) truncate(op, path string, fi fs.FileInfo, size uint64) error {
	switch {
	case fi.IsDir():
		return fail(op, path, errnoErr("a directory has no length to set", syscall.EISDIR))
	case !fi.Mode().IsRegular():
		return fail(op, path, errnoErr(fmt.Sprintf("not a regular file (%v)", fi.Mode().Type()), syscall.EINVAL))
	case size > math.MaxInt64:
		return fail(op, path, errnoErr("size beyond the largest file", syscall.EFBIG))
	}
	f, err := s.openRegular(op, path, rootName(path), os.O_WRONLY)
	if err != nil {
		return err
	}
	err = f.Truncate(int64(size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(op, path, err)
	}
	return nil
}

// lutimes sets the atime and mtime of the symlink at path (not the root) on the link itself; a
// zero time is left as it is. The parent directory is opened through os.Root and the link named
// relative to it by its base name alone, which CheckPath guarantees is neither "." nor "..", so
// nothing outside the share is reached. Where the system cannot set a link's times, it does
// nothing.
func (s *Share) lutimes(path string, atime, mtime time.Time) error {
	d, err := s.root.OpenFile(rootName(parentDir(path)), os.O_RDONLY|rootfs.ODirectory, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	err = lutimesAt(d, baseName(path), atime, mtime)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	return err
}

// notDir fails with EISDIR, saying why, if name (path, valid and not the root, or a name
// beside it) is an existing directory; a missing name is no failure.
func (s *Share) notDir(op, path, name, why string) error {
	fi, err := s.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fail(op, path, err)
	case fi.IsDir():
		return fail(op, path, errnoErr(why, syscall.EISDIR))
	}
	return nil
}

func parentDir(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i]
	}
	return ""
}

func baseName(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }

func partBase(part string) string { return fmt.Sprintf("%q", baseName(part)) }
