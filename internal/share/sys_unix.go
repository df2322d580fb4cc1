//go:build unix

package share

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// atRemoveDir makes unlinkat remove a directory (rmdir) instead of a file.
const atRemoveDir = unix.AT_REMOVEDIR

func unlinkat(dirfd int, name string, flags int) error { return unix.Unlinkat(dirfd, name, flags) }

func setNonblock(fd uintptr, nonblocking bool) error {
	return syscall.SetNonblock(int(fd), nonblocking)
}
