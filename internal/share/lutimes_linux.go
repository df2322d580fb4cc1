package share

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// Linux values, the same on every architecture; the syscall package does not export them.
const (
	atSymlinkNoFollow = 0x100
	utimeOmit         = 1<<30 - 2
)

// lutimesAt sets the atime and mtime of name in the directory dir without following it if it
// is a symlink (utimensat with AT_SYMLINK_NOFOLLOW); a zero time leaves that time as it is.
// name must be a single component.
func lutimesAt(dir *os.File, name string, atime, mtime time.Time) error {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	ts := [2]syscall.Timespec{{Nsec: utimeOmit}, {Nsec: utimeOmit}}
	if !atime.IsZero() {
		ts[0] = syscall.NsecToTimespec(atime.UnixNano())
	}
	if !mtime.IsZero() {
		ts[1] = syscall.NsecToTimespec(mtime.UnixNano())
	}
	rc, err := dir.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	err = rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_UTIMENSAT, fd,
			uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&ts)), atSymlinkNoFollow, 0, 0)
	})
	if err != nil {
		return err
	}
	if errno != 0 {
		return os.NewSyscallError("utimensat", errno)
	}
	return nil
}

// futimes sets the atime and mtime of the open file f (utimensat on the descriptor, as
// futimens(3) does).
func futimes(f *os.File, atime, mtime time.Time) error {
	ts := [2]syscall.Timespec{syscall.NsecToTimespec(atime.UnixNano()), syscall.NsecToTimespec(mtime.UnixNano())}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	err = rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_UTIMENSAT, fd, 0, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	})
	if err != nil {
		return err
	}
	if errno != 0 {
		return os.NewSyscallError("futimens", errno)
	}
	return nil
}
