package share

import (
	"os"
	"syscall"
)

// Windows has no *at system calls in Go's syscall package: the owner side serves pulls,
// sends, listings and reads there through os.Root, and refuses the mount's removals and
// renames by directory handle with EOPNOTSUPP until they are built on NtSetInformationFile.

// oDirectory: Windows opens a directory with plain O_RDONLY; os.Root never opens a device.
const oDirectory = 0

// oNoFollow: Windows has no O_NOFOLLOW; os.Root still refuses a link that leads out.
const oNoFollow = 0

// atRemoveDir has unlinkat's meaning on Unix: remove a directory.
const atRemoveDir = 0x200

func unlinkat(dirfd int, name string, flags int) error { return syscall.EOPNOTSUPP }

func renameAt(fromDir int, fromName string, toDir int, toName string, flags uint32) error {
	return syscall.EOPNOTSUPP
}

// setNonblock: Windows file handles have no O_NONBLOCK to clear.
func setNonblock(fd uintptr, nonblocking bool) error { return nil }

// syncDirFile: NTFS journals its directory entries, and FlushFileBuffers refuses a directory
// handle opened for reading, so there is nothing to flush by hand.
func syncDirFile(d *os.File) error { return nil }
