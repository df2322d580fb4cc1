//go:build unix

package share

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// oDirectory makes an open fail with ENOTDIR unless the name is a directory, so a FIFO or a
// device under the name is never opened.
const oDirectory = syscall.O_DIRECTORY

// oNoFollow makes an open fail if the last component is a symlink.
const oNoFollow = syscall.O_NOFOLLOW

// atRemoveDir makes unlinkat remove a directory (rmdir) instead of a file.
const atRemoveDir = unix.AT_REMOVEDIR

func unlinkat(dirfd int, name string, flags int) error { return unix.Unlinkat(dirfd, name, flags) }

func setNonblock(fd uintptr, nonblocking bool) error {
	return syscall.SetNonblock(int(fd), nonblocking)
}

// syncDirFile flushes the directory d's entries to stable storage.
func syncDirFile(d *os.File) error { return d.Sync() }
