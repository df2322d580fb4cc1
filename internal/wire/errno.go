package wire

import (
	"fmt"
	"syscall"
)

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
	// ErrnoConflict: a journal's change was not applied because the file changed on the owner
	// since the mount last saw it (APPLY).
	ErrnoConflict Errno = 1006
)

// codes is the one table of wire codes: per code its name, the errno of this system that
// means the same (0: none; peerfs's own codes have none), and the text an owner sends with it
// in an ERROR frame ("": the name). The owner maps its OS errors through it (FromHost); the
// texts come from here, never from an OS error's text, which may hold the owner's paths.
var codes = []struct {
	code Errno
	name string
	host syscall.Errno
	text string
}{
	{EPERM, "EPERM", syscall.EPERM, "operation not permitted"},
	{ENOENT, "ENOENT", syscall.ENOENT, "no such file or directory"},
	{EIO, "EIO", syscall.EIO, "input/output error"},
	{EBADF, "EBADF", syscall.EBADF, ""},
	{EAGAIN, "EAGAIN", syscall.EAGAIN, "temporarily unavailable: try again"},
	{ENOMEM, "ENOMEM", syscall.ENOMEM, ""},
	{EACCES, "EACCES", syscall.EACCES, "permission denied"},
	{EBUSY, "EBUSY", syscall.EBUSY, "device or resource busy"},
	{EEXIST, "EEXIST", syscall.EEXIST, "file exists"},
	{EXDEV, "EXDEV", syscall.EXDEV, "cross-device link"},
	{ENOTDIR, "ENOTDIR", syscall.ENOTDIR, "not a directory"},
	{EISDIR, "EISDIR", syscall.EISDIR, "is a directory"},
	{EINVAL, "EINVAL", syscall.EINVAL, "invalid argument"},
	{EFBIG, "EFBIG", syscall.EFBIG, "file too large"},
	{ENOSPC, "ENOSPC", syscall.ENOSPC, "no space left on the owner's device"},
	{EROFS, "EROFS", syscall.EROFS, "read-only file system"},
	{EMLINK, "EMLINK", syscall.EMLINK, "too many links"},
	{ENAMETOOLONG, "ENAMETOOLONG", syscall.ENAMETOOLONG, "file name too long"},
	{ENOSYS, "ENOSYS", syscall.ENOSYS, "not implemented by the owner's system"},
	{ENOTEMPTY, "ENOTEMPTY", syscall.ENOTEMPTY, "directory not empty"},
	{ELOOP, "ELOOP", syscall.ELOOP, "too many levels of symbolic links"},
	{ENODATA, "ENODATA", hostNoAttr, "no such attribute"},
	{EOPNOTSUPP, "EOPNOTSUPP", syscall.EOPNOTSUPP, "operation not supported"},
	{EDQUOT, "EDQUOT", syscall.EDQUOT, "the owner's disk quota is exceeded"},
	{ECANCELED, "ECANCELED", syscall.ECANCELED, ""},
	{ErrnoPathRefused, "PATH_REFUSED", 0, "path refused"},
	{ErrnoNoShare, "NO_SHARE", 0, ""},
	{ErrnoHashMismatch, "HASH_MISMATCH", 0, ""},
	{ErrnoChanged, "CHANGED", 0, ""},
	{ErrnoProtocol, "PROTOCOL", 0, ""},
	{ErrnoUnsupported, "UNSUPPORTED", 0, ""},
	{ErrnoConflict, "CONFLICT", 0, "the file changed on the owner since the mount last saw it"},
}

var (
	errnoNames = map[Errno]string{}        // code -> name
	errnoTexts = map[Errno]string{}        // code -> text
	fromHost   = map[syscall.Errno]Errno{} // this system's errno -> code
)

func init() {
	for _, c := range codes {
		errnoNames[c.code] = c.name
		errnoTexts[c.code] = c.text
		if c.host != 0 {
			fromHost[c.host] = c.code
		}
	}
	for host, code := range hostAliases {
		fromHost[host] = code
	}
}

// FromHost returns the wire code of an errno of this system, and false for one the wire has
// no code for.
func FromHost(errno syscall.Errno) (Errno, bool) {
	code, ok := fromHost[errno]
	return code, ok
}

// Text is the text an owner sends with the code: what it means, never where it happened.
// For a code with no text of its own it is the code's name.
func (e Errno) Text() string {
	if t := errnoTexts[e]; t != "" {
		return t
	}
	return e.String()
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
