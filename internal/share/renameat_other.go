//go:build unix && !linux

package share

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// renameAt renames without flags: renameat2's NOREPLACE and EXCHANGE are Linux's (EINVAL, as
// renameat2 answers where a filesystem lacks them).
func renameAt(fromDir int, fromName string, toDir int, toName string, flags uint32) error {
	if flags != 0 {
		return syscall.EINVAL
	}
	return unix.Renameat(fromDir, fromName, toDir, toName)
}
