package share

import (
	"syscall"

	"github.com/peerfs/peerfs/internal/wire"
)

// hostErrno maps the errnos whose value or existence differs between systems. On Linux
// ENOTSUP and EOPNOTSUPP are one value, and a missing extended attribute is ENODATA.
func hostErrno(errno syscall.Errno) (wire.Errno, bool) {
	switch errno {
	case syscall.EOPNOTSUPP:
		return wire.EOPNOTSUPP, true
	case syscall.ENODATA:
		return wire.ENODATA, true
	}
	return 0, false
}
