package fusefs

import (
	"context"
	"errors"
	"syscall"

	"github.com/peerfs/peerfs/internal/wire"
)

// toErrno is the one place errors become what the application sees. The owner's errno
// crosses the wire as a number and is passed through; a link that stays down past the wait
// bound, or a broken protocol, is EIO; an interrupted wait is EINTR.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var re *wire.RemoteError
	if errors.As(err, &re) {
		return wireErrno(re.Code)
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	if errors.Is(err, context.Canceled) {
		return syscall.EINTR
	}
	return syscall.EIO
}

// wireErrno maps a wire code to a local errno: POSIX codes keep their number (wire fixes
// Linux's values), peerfs's own codes get the nearest POSIX meaning.
func wireErrno(c wire.Errno) syscall.Errno {
	switch c {
	case wire.ErrnoPathRefused:
		return syscall.EACCES
	case wire.ErrnoNoShare:
		return syscall.ENOENT
	case wire.ErrnoHashMismatch, wire.ErrnoChanged, wire.ErrnoProtocol:
		return syscall.EIO
	case wire.ErrnoUnsupported:
		return syscall.ENOSYS
	}
	if c > 0 && c < 1000 {
		return syscall.Errno(c)
	}
	return syscall.EIO
}
