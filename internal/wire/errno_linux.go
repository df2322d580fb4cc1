package wire

import "syscall"

// hostNoAttr is Linux's errno for a missing extended attribute.
const hostNoAttr = syscall.ENODATA

// hostAliases are the errnos of this system that mean a code whose own errno is another one:
// on Linux ENOTSUP and EOPNOTSUPP are one value, so there are none.
var hostAliases = map[syscall.Errno]Errno{}
