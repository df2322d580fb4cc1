package wire

import "fmt"

// Errno is an error code that crosses the wire. Values below 1000 are the POSIX errno numbers as
// Linux defines them, fixed here so that peers on other systems agree on them; values from 1000
// are peerfs's own.
type Errno uint32

const (
	EPERM        Errno = 1
	ENOENT       Errno = 2
	EIO          Errno = 5
	EBADF        Errno = 9
	EAGAIN       Errno = 11
	ENOMEM       Errno = 12
	EACCES       Errno = 13
	EBUSY        Errno = 16
	EEXIST       Errno = 17
	EXDEV        Errno = 18
	ENOTDIR      Errno = 20
	EISDIR       Errno = 21
	EINVAL       Errno = 22
	EFBIG        Errno = 27
	ENOSPC       Errno = 28
	EROFS        Errno = 30
	EMLINK       Errno = 31
	ENAMETOOLONG Errno = 36
	ENOSYS       Errno = 38
	ENOTEMPTY    Errno = 39
	ELOOP        Errno = 40
	ENODATA      Errno = 61 // no such extended attribute
	EOPNOTSUPP   Errno = 95 // not supported here: an xattr namespace other than "user.", a fallocate mode
	EDQUOT       Errno = 122
	ECANCELED    Errno = 125

	// ErrnoPathRefused: the path is not a clean relative path inside the share (.., absolute,
	// NUL, too long) or leads outside it through a symlink.
	ErrnoPathRefused Errno = 1000
	// ErrnoNoShare: no share of that name is exported to the asking peer.
	ErrnoNoShare Errno = 1001
	// ErrnoHashMismatch: the content hash of received data differs from the sender's.
	ErrnoHashMismatch Errno = 1002
	// ErrnoChanged: the source file changed while it was being sent.
	ErrnoChanged Errno = 1003
	// ErrnoProtocol: the request was malformed.
	ErrnoProtocol Errno = 1004
	// ErrnoUnsupported: the request op is not known to this peer.
	ErrnoUnsupported Errno = 1005
)

var errnoNames = map[Errno]string{
	EPERM: "EPERM", ENOENT: "ENOENT", EIO: "EIO", EBADF: "EBADF", EAGAIN: "EAGAIN",
	ENOMEM: "ENOMEM", EACCES: "EACCES", EBUSY: "EBUSY", EEXIST: "EEXIST", EXDEV: "EXDEV",
	ENOTDIR: "ENOTDIR", EISDIR: "EISDIR", EINVAL: "EINVAL", EFBIG: "EFBIG", ENOSPC: "ENOSPC",
	EROFS: "EROFS", EMLINK: "EMLINK", ENAMETOOLONG: "ENAMETOOLONG", ENOSYS: "ENOSYS",
	ENOTEMPTY: "ENOTEMPTY", ELOOP: "ELOOP", ENODATA: "ENODATA", EOPNOTSUPP: "EOPNOTSUPP",
	EDQUOT: "EDQUOT", ECANCELED: "ECANCELED",
	ErrnoPathRefused: "PATH_REFUSED", ErrnoNoShare: "NO_SHARE", ErrnoHashMismatch: "HASH_MISMATCH",
	ErrnoChanged: "CHANGED", ErrnoProtocol: "PROTOCOL", ErrnoUnsupported: "UNSUPPORTED",
}

func (e Errno) String() string {
	if s, ok := errnoNames[e]; ok {
		return s
	}
	return fmt.Sprintf("ERRNO_%d", uint32(e))
}

// RemoteError is an ERROR frame received from the peer. Callers branch on Code with errors.As.
type RemoteError struct {
	Code    Errno
	Message string
}

func (e *RemoteError) Error() string {
	if e.Message == "" {
		return "peer: " + e.Code.String()
	}
	return "peer: " + e.Message
}

// Is lets errors.Is(err, wire.ENOENT) match a RemoteError by code.
func (e *RemoteError) Is(target error) bool {
	if code, ok := target.(Errno); ok {
		return code == e.Code
	}
	return false
}

// Error makes Errno usable as an error value (errors.Is target).
func (e Errno) Error() string { return e.String() }
