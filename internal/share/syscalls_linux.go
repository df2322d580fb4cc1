package share

import (
	"errors"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/peerfs/peerfs/internal/wire"
)

// fallocKnown is every fallocate(2) mode bit a peer may ask for: each acts on the blocks of the
// one open file. FALLOC_FL_NO_HIDE_STALE is left out (no filesystem accepts it from userspace).
const fallocKnown = unix.FALLOC_FL_KEEP_SIZE | unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_COLLAPSE_RANGE |
	unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_INSERT_RANGE | unix.FALLOC_FL_UNSHARE_RANGE |
	unix.FALLOC_FL_WRITE_ZEROES

// renameAt renames with renameat2(2); the wire flags map one to one onto RENAME_NOREPLACE and
// RENAME_EXCHANGE.
func renameAt(fromDir int, fromName string, toDir int, toName string, flags uint32) error {
	var f uint
	if flags&wire.RenameNoReplace != 0 {
		f |= unix.RENAME_NOREPLACE
	}
	if flags&wire.RenameExchange != 0 {
		f |= unix.RENAME_EXCHANGE
	}
	return unix.Renameat2(fromDir, fromName, toDir, toName, f)
}

func statfs(d *os.File) (wire.Statfs, error) {
	var st unix.Statfs_t
	if err := withFd(d, func(fd int) error { return unix.Fstatfs(fd, &st) }); err != nil {
		return wire.Statfs{}, os.NewSyscallError("fstatfs", err)
	}
	// The block counts are in units of the fragment size where the filesystem has one
	// (statvfs(3) reads them so); f_bsize is only the preferred I/O size.
	bsize := uint64(st.Frsize)
	if bsize == 0 {
		bsize = uint64(st.Bsize)
	}
	return wire.Statfs{
		Bsize: bsize, Blocks: st.Blocks, Bfree: st.Bfree, Bavail: st.Bavail,
		Files: st.Files, Ffree: st.Ffree, NameLen: uint32(st.Namelen),
	}, nil
}

// xattrRetries is how often getXattr and listXattr size their buffer from the current length
// before taking the largest one Linux allows: each retry means the attributes changed between
// the two calls.
const xattrRetries = 2

// getXattr reads one attribute's value. The length is asked first so a small value costs a
// small buffer; if the value grows before it is read (ERANGE), the length is asked again.
func getXattr(f *os.File, name string) ([]byte, error) {
	for try := 0; ; try++ {
		var buf []byte
		if try < xattrRetries {
			var n int
			err := withFd(f, func(fd int) (err error) { n, err = unix.Fgetxattr(fd, name, nil); return err })
			if err != nil {
				return nil, os.NewSyscallError("fgetxattr", err)
			}
			buf = make([]byte, n)
		} else {
			buf = make([]byte, wire.MaxXattrValue) // XATTR_SIZE_MAX: cannot be too small
		}
		var n int
		err := withFd(f, func(fd int) (err error) { n, err = unix.Fgetxattr(fd, name, buf); return err })
		if errors.Is(err, syscall.ERANGE) && try < xattrRetries {
			continue
		}
		if err != nil {
			return nil, os.NewSyscallError("fgetxattr", err)
		}
		if n == 0 {
			return nil, nil
		}
		return buf[:n], nil
	}
}

// listXattrMax is XATTR_LIST_MAX, the longest name list Linux returns.
const listXattrMax = 64 << 10

// listXattr returns every attribute name of f, in every namespace, as the kernel lists them.
func listXattr(f *os.File) ([]string, error) {
	for try := 0; ; try++ {
		var buf []byte
		if try < xattrRetries {
			var n int
			err := withFd(f, func(fd int) (err error) { n, err = unix.Flistxattr(fd, nil); return err })
			if err != nil {
				return nil, os.NewSyscallError("flistxattr", err)
			}
			buf = make([]byte, n)
		} else {
			buf = make([]byte, listXattrMax)
		}
		var n int
		err := withFd(f, func(fd int) (err error) { n, err = unix.Flistxattr(fd, buf); return err })
		if errors.Is(err, syscall.ERANGE) && try < xattrRetries {
			continue
		}
		if err != nil {
			return nil, os.NewSyscallError("flistxattr", err)
		}
		var names []string
		for _, name := range strings.Split(string(buf[:n]), "\x00") {
			if name != "" {
				names = append(names, name)
			}
		}
		return names, nil
	}
}

// setXattr sets one attribute; the wire flags are setxattr(2)'s XATTR_CREATE and XATTR_REPLACE.
func setXattr(f *os.File, name string, value []byte, flags uint32) error {
	var fl int
	if flags&wire.XattrCreate != 0 {
		fl |= unix.XATTR_CREATE
	}
	if flags&wire.XattrReplace != 0 {
		fl |= unix.XATTR_REPLACE
	}
	err := withFd(f, func(fd int) error { return unix.Fsetxattr(fd, name, value, fl) })
	if err != nil {
		return os.NewSyscallError("fsetxattr", err)
	}
	return nil
}

func removeXattr(f *os.File, name string) error {
	if err := withFd(f, func(fd int) error { return unix.Fremovexattr(fd, name) }); err != nil {
		return os.NewSyscallError("fremovexattr", err)
	}
	return nil
}

func fallocate(f *os.File, mode uint32, off, length int64) error {
	if err := withFd(f, func(fd int) error { return unix.Fallocate(fd, mode, off, length) }); err != nil {
		return os.NewSyscallError("fallocate", err)
	}
	return nil
}

func fdatasync(f *os.File) error {
	if err := withFd(f, unix.Fdatasync); err != nil {
		return os.NewSyscallError("fdatasync", err)
	}
	return nil
}

// mknodAt makes the special file name in directory dirFd; rdev is in Linux's encoding.
func mknodAt(dirFd int, name string, mode uint32, rdev uint64) error {
	return unix.Mknodat(dirFd, name, mode, int(rdev))
}

func syncfs(d *os.File) error { return unix.Syncfs(int(d.Fd())) }
