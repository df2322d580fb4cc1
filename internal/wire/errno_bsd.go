//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package wire

import "syscall"

// hostNoAttr is the BSDs' errno for a missing extended attribute (Linux's ENODATA).
const hostNoAttr = syscall.ENOATTR

// hostAliases are the errnos of this system that mean a code whose own errno is another one:
// ENOTSUP and EOPNOTSUPP are two values here and mean the same to a peer.
var hostAliases = map[syscall.Errno]Errno{syscall.ENOTSUP: EOPNOTSUPP}
