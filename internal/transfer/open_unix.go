//go:build unix

package transfer

import (
	"os"
	"syscall"
)

// oNoFollow makes opening a part file fail if its name is a symlink, even one that stays
// inside the destination.
const oNoFollow = syscall.O_NOFOLLOW

// oDirectory makes an open fail unless the name is a directory.
const oDirectory = syscall.O_DIRECTORY

// syncDirFile flushes the directory d's entries to stable storage.
func syncDirFile(d *os.File) error { return d.Sync() }
