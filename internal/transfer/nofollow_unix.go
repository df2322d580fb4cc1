//go:build unix

package transfer

import "syscall"

// oNoFollow makes opening a part file fail if its name is a symlink, even one that stays
// inside the destination.
const oNoFollow = syscall.O_NOFOLLOW
