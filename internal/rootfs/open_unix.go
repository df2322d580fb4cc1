//go:build unix

package rootfs

import (
	"os"
	"syscall"
)

// ODirectory makes an open fail with ENOTDIR unless the name is a directory, so a FIFO or a
// device under the name is never opened.
const ODirectory = syscall.O_DIRECTORY

// ONoFollow makes an open fail if the last component is a symlink, even one that stays inside
// the root.
const ONoFollow = syscall.O_NOFOLLOW

// syncDirFile flushes the directory d's entries to stable storage.
func syncDirFile(d *os.File) error { return d.Sync() }
