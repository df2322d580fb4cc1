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

// wireErrno maps a wire code to a local errno. Wire codes are Linux's numbers; they are
// translated by name, since other systems number them differently (EAGAIN is 11 on Linux and
// 35 on macOS, and a missing attribute is ENODATA on Linux, ENOATTR elsewhere). peerfs's own
// codes get the nearest POSIX meaning; a code this build does not know is EIO.
func wireErrno(c wire.Errno) syscall.Errno {
	if e, ok := localErrno[c]; ok {
		return e
	}
	return syscall.EIO
}

var localErrno = map[wire.Errno]syscall.Errno{
	wire.EPERM: syscall.EPERM, wire.ENOENT: syscall.ENOENT, wire.EIO: syscall.EIO,
	wire.EBADF: syscall.EBADF, wire.EAGAIN: syscall.EAGAIN, wire.ENOMEM: syscall.ENOMEM,
	wire.EACCES: syscall.EACCES, wire.EBUSY: syscall.EBUSY, wire.EEXIST: syscall.EEXIST,
	wire.EXDEV: syscall.EXDEV, wire.ENOTDIR: syscall.ENOTDIR, wire.EISDIR: syscall.EISDIR,
	wire.EINVAL: syscall.EINVAL, wire.EFBIG: syscall.EFBIG, wire.ENOSPC: syscall.ENOSPC,
	wire.EROFS: syscall.EROFS, wire.EMLINK: syscall.EMLINK, wire.ENAMETOOLONG: syscall.ENAMETOOLONG,
	wire.ENOSYS: syscall.ENOSYS, wire.ENOTEMPTY: syscall.ENOTEMPTY, wire.ELOOP: syscall.ELOOP,
	wire.ENODATA: errNoAttr, wire.EOPNOTSUPP: syscall.EOPNOTSUPP, wire.EDQUOT: syscall.EDQUOT,
	wire.ECANCELED: syscall.ECANCELED,

	wire.ErrnoPathRefused:  syscall.EACCES,
	wire.ErrnoNoShare:      syscall.ENOENT,
	wire.ErrnoHashMismatch: syscall.EIO,
	wire.ErrnoChanged:      syscall.EIO,
	wire.ErrnoProtocol:     syscall.EIO,
	wire.ErrnoUnsupported:  syscall.ENOSYS,
	// A change the owner refused because its file changed there meanwhile: the mount keeps
	// both versions, so an application that hears of it gets the deferred write error NFS
	// gives.
	wire.ErrnoConflict: syscall.EIO,
}
