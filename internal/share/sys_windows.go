package share

import (
	"errors"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/peerfs/peerfs/internal/wire"
)

// Windows has no *at calls in Go's syscall package. The mount's removals and renames go by
// directory handle there too: the entry is opened with NtCreateFile relative to the parent
// directory's handle (which os.Root opened, see openParent), by its single-component name,
// with FILE_OPEN_REPARSE_POINT so a final symlink or junction is the entry itself, never
// followed; then it is marked for deletion, or renamed with FILE_RENAME_INFORMATION relative
// to the target directory's handle. Nothing outside the two directories can be reached, as
// with unlinkat and renameat on Unix.

// atRemoveDir has unlinkat's meaning on Unix: remove a directory.
const atRemoveDir = 0x200

// entryAccess is what an entry is opened with to be removed or renamed: DELETE for either,
// attributes to tell its type, SYNCHRONIZE for synchronous I/O on the handle.
const entryAccess = windows.DELETE | windows.FILE_READ_ATTRIBUTES | windows.SYNCHRONIZE

// unlinkat removes the entry name of the directory dirfd with unlink(2) semantics (rmdir(2)
// with atRemoveDir): a directory is EISDIR for unlink, a non-directory ENOTDIR for rmdir, a
// directory with entries ENOTEMPTY. A symlink or junction is a non-directory: the link goes,
// never its target.
func unlinkat(dirfd int, name string, flags int) error {
	h, info, err := openEntry(windows.Handle(dirfd), name, entryAccess)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(h)
	switch dir := isDir(info); {
	case flags&atRemoveDir != 0 && !dir:
		return syscall.ENOTDIR
	case flags&atRemoveDir == 0 && dir:
		return syscall.EISDIR
	}
	return markDeleted(h)
}

// renameAt renames fromName of fromDir to toName of toDir with rename(2) semantics: a
// non-directory replaces a non-directory, a directory replaces an empty directory (EISDIR and
// ENOTDIR across types), a name renamed onto the same file (another spelling of it on a
// folder that folds case) is renamed in place. wire.RenameNoReplace refuses an existing
// target (EEXIST); wire.RenameExchange has no Windows equivalent (EINVAL, as renameat2 answers
// where a filesystem lacks it).
//
// Replacing a directory is two steps, as NTFS renames over no directory: the empty target is
// removed first, so a failure between them leaves the target gone and the source in place.
func renameAt(fromDir int, fromName string, toDir int, toName string, flags uint32) error {
	if flags&wire.RenameExchange != 0 {
		return syscall.EINVAL
	}
	src, srcInfo, err := openEntry(windows.Handle(fromDir), fromName, entryAccess)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(src)
	replace := false
	dst, dstInfo, err := openEntry(windows.Handle(toDir), toName, entryAccess)
	switch {
	case err == nil:
		replace, err = prepareTarget(dst, srcInfo, dstInfo, flags)
		windows.CloseHandle(dst) // an open target cannot be replaced; a deletion takes effect now
		if err != nil {
			return err
		}
	case !errors.Is(err, syscall.ENOENT):
		return err
	}
	return renameEntry(src, windows.Handle(toDir), toName, replace)
}

// prepareTarget decides what renaming the entry src over the existing entry dst (open) does:
// replace it, refuse, or, for an empty directory, delete it first.
func prepareTarget(dst windows.Handle, src, dstInfo windows.ByHandleFileInformation, flags uint32) (replace bool, err error) {
	same := src.VolumeSerialNumber == dstInfo.VolumeSerialNumber &&
		src.FileIndexHigh == dstInfo.FileIndexHigh && src.FileIndexLow == dstInfo.FileIndexLow
	switch {
	case same:
		return true, nil // the same entry under another spelling
	case flags&wire.RenameNoReplace != 0:
		return false, syscall.EEXIST
	case isDir(src) && !isDir(dstInfo):
		return false, syscall.ENOTDIR
	case !isDir(src) && isDir(dstInfo):
		return false, syscall.EISDIR
	case isDir(dstInfo):
		return false, markDeleted(dst) // ENOTEMPTY for a directory with entries
	}
	return true, nil
}

// openEntry opens the entry name (one component) of the directory dir without following it,
// and returns its handle and attributes. The caller closes the handle.
func openEntry(dir windows.Handle, name string, access uint32) (windows.Handle, windows.ByHandleFileInformation, error) {
	var info windows.ByHandleFileInformation
	objName, err := windows.NewNTUnicodeString(name)
	if err != nil {
		return 0, info, syscall.EINVAL // a NUL in the name, which CheckPath already refuses
	}
	oa := windows.OBJECT_ATTRIBUTES{RootDirectory: dir, ObjectName: objName}
	oa.Length = uint32(unsafe.Sizeof(oa))
	var h windows.Handle
	var iosb windows.IO_STATUS_BLOCK
	err = windows.NtCreateFile(&h, access, &oa, &iosb, nil, 0,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, windows.FILE_OPEN,
		windows.FILE_OPEN_REPARSE_POINT|windows.FILE_SYNCHRONOUS_IO_NONALERT, 0, 0)
	if err != nil {
		return 0, info, ntErrno(err)
	}
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		windows.CloseHandle(h)
		return 0, info, err
	}
	return h, info, nil
}

// isDir reports whether the entry is a directory proper: a symlink or junction to one is a
// reparse point, which unlink(2) and rename(2) treat as a link.
func isDir(info windows.ByHandleFileInformation) bool {
	return info.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY != 0 &&
		info.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT == 0
}

// markDeleted marks the open entry h for deletion. POSIX semantics (Windows 10 1709 and later)
// take the name away at once even if the file is open elsewhere, as unlink(2) does, and a
// read-only attribute does not stop it; where the system lacks them, the classic disposition
// deletes the name when the last handle closes.
func markDeleted(h windows.Handle) error {
	var iosb windows.IO_STATUS_BLOCK
	ex := uint32(windows.FILE_DISPOSITION_DELETE | windows.FILE_DISPOSITION_POSIX_SEMANTICS |
		windows.FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE)
	err := windows.NtSetInformationFile(h, &iosb, (*byte)(unsafe.Pointer(&ex)), uint32(unsafe.Sizeof(ex)),
		windows.FileDispositionInformationEx)
	switch err {
	case nil:
		return nil
	case windows.STATUS_DIRECTORY_NOT_EMPTY, windows.STATUS_CANNOT_DELETE:
		return ntErrno(err)
	}
	// Any other failure: the file system lacks POSIX semantics (FAT), or the system lacks
	// FILE_DISPOSITION_INFORMATION_EX (Windows before 10 1709, Wine).
	del := uint32(1) // FILE_DISPOSITION_INFORMATION: BOOLEAN DeleteFile
	err = windows.NtSetInformationFile(h, &iosb, (*byte)(unsafe.Pointer(&del)), uint32(unsafe.Sizeof(del)),
		windows.FileDispositionInformation)
	return ntErrno(err)
}

// fileRenameInformation is FILE_RENAME_INFORMATION: the file name follows the fixed part.
type fileRenameInformation struct {
	replaceIfExists uint32 // a BOOLEAN, padded to the handle's alignment
	rootDirectory   windows.Handle
	fileNameLength  uint32 // bytes
	fileName        [1]uint16
}

// renameEntry renames the open entry h to name (one component) in the directory dir.
func renameEntry(h, dir windows.Handle, name string, replace bool) error {
	name16, err := windows.UTF16FromString(name)
	if err != nil {
		return syscall.EINVAL
	}
	name16 = name16[:len(name16)-1] // no terminating NUL: the length is given
	var info fileRenameInformation
	size := unsafe.Offsetof(info.fileName) + uintptr(len(name16))*2
	size = max(size, unsafe.Sizeof(info))
	buf := make([]uint64, (size+7)/8) // 8-byte aligned, as the handle field needs
	ri := (*fileRenameInformation)(unsafe.Pointer(&buf[0]))
	if replace {
		ri.replaceIfExists = 1
	}
	ri.rootDirectory = dir
	ri.fileNameLength = uint32(len(name16) * 2)
	copy(unsafe.Slice(&ri.fileName[0], len(name16)), name16)
	var iosb windows.IO_STATUS_BLOCK
	err = windows.NtSetInformationFile(h, &iosb, (*byte)(unsafe.Pointer(&buf[0])), uint32(size),
		windows.FileRenameInformation)
	return ntErrno(err)
}

// ntErrno turns the NTSTATUS of a failed call into the errno the share maps to the wire
// (errno.go), for the failures rename(2) and unlink(2) name; any other becomes the Windows
// error it stands for.
func ntErrno(err error) error {
	st, ok := err.(windows.NTStatus)
	if !ok {
		return err
	}
	switch st {
	case windows.STATUS_OBJECT_NAME_NOT_FOUND, windows.STATUS_OBJECT_PATH_NOT_FOUND:
		return syscall.ENOENT
	case windows.STATUS_OBJECT_NAME_COLLISION:
		return syscall.EEXIST
	case windows.STATUS_DIRECTORY_NOT_EMPTY:
		return syscall.ENOTEMPTY
	case windows.STATUS_FILE_IS_A_DIRECTORY:
		return syscall.EISDIR
	case windows.STATUS_NOT_A_DIRECTORY:
		return syscall.ENOTDIR
	case windows.STATUS_ACCESS_DENIED, windows.STATUS_CANNOT_DELETE:
		return syscall.EACCES
	case windows.STATUS_SHARING_VIOLATION:
		return syscall.EBUSY
	case windows.STATUS_NOT_SAME_DEVICE:
		return syscall.EXDEV
	}
	return st.Errno()
}

// setNonblock: Windows file handles have no O_NONBLOCK to clear.
func setNonblock(fd uintptr, nonblocking bool) error { return nil }
