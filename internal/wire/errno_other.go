//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package wire

import "syscall"

// hostNoAttr is this system's errno of the name Linux gives a missing extended attribute.
const hostNoAttr = syscall.ENODATA

// hostAliases are the errnos of this system that mean a code whose own errno is another one:
// ENOTSUP and EOPNOTSUPP may be two values and mean the same to a peer.
var hostAliases = map[syscall.Errno]Errno{syscall.ENOTSUP: EOPNOTSUPP}
