//go:build !linux

package share

import (
	"syscall"

	"github.com/peerfs/peerfs/internal/wire"
)

// hostErrno maps the errnos whose value or existence differs between systems. Elsewhere
// ENOTSUP and EOPNOTSUPP may be two values; both mean the same to a peer. Extended attributes
// are not served off Linux, so no ENODATA (or the BSDs' ENOATTR) reaches a peer from here.
func hostErrno(errno syscall.Errno) (wire.Errno, bool) {
	if errno == syscall.ENOTSUP || errno == syscall.EOPNOTSUPP {
		return wire.EOPNOTSUPP, true
	}
	return 0, false
}
