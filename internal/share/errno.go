package share

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/peerfs/peerfs/internal/prealloc"
	"github.com/peerfs/peerfs/internal/rootfs"
	"github.com/peerfs/peerfs/internal/wire"
)

// ownersOwn are the codes of failures that concern the owner's process rather than the
// peer's file (a descriptor of its own, its memory, a call it cancelled): they reach the peer
// as EIO, not as a code its application would take for its own.
var ownersOwn = map[wire.Errno]bool{wire.EBADF: true, wire.ENOMEM: true, wire.ECANCELED: true}

// Errno maps an error from this package (or any OS error) to the code sent to the peer. It is
// the one place where OS errors become wire codes. nil maps to 0.
func Errno(err error) wire.Errno {
	if err == nil {
		return 0
	}
	// Order matters: a refusal may wrap an errno, and a syscall.Errno matches several fs.Err*
	// values (ENOTEMPTY is also fs.ErrExist), so the precise checks come first.
	if errors.Is(err, ErrReadOnly) {
		return wire.EROFS
	}
	if errors.Is(err, wire.ErrPathRefused) || rootfs.IsEscape(err) {
		return wire.ErrnoPathRefused
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if code, ok := wire.FromHost(errno); ok && !ownersOwn[code] {
			return code
		}
		return wire.EIO
	}
	// Codes already in wire terms (a peer's answer relayed, or set deliberately) pass through.
	var remote *wire.RemoteError
	if errors.As(err, &remote) {
		return remote.Code
	}
	var code wire.Errno
	if errors.As(err, &code) {
		return code
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return wire.ENOENT
	case errors.Is(err, fs.ErrPermission):
		return wire.EACCES
	case errors.Is(err, fs.ErrExist):
		return wire.EEXIST
	case errors.Is(err, fs.ErrInvalid):
		return wire.EINVAL
	}
	return wire.EIO
}

// Message returns a one-line text for an ERROR frame, at most wire.MaxMessageLen bytes. It is
// built from the operation, the share-relative path and the error code only (plus this
// package's own refusal texts), so it never reveals the owner's absolute paths.
func Message(err error) string {
	if err == nil {
		return ""
	}
	var why string
	var ref *refusal
	var ro *readOnlyError
	var nospace *prealloc.NoSpaceError
	var named *nameError
	switch {
	case errors.As(err, &ro):
		why = ro.Error()
	case errors.Is(err, ErrHardlink):
		why = ErrHardlink.Error()
	case errors.As(err, &ref):
		why = ref.why
	case errors.As(err, &named):
		why = named.why
	case errors.As(err, &nospace):
		// Numbers only: how much the upload needs and how much is free.
		why = "no space left on the owner's device: " + strings.TrimPrefix(nospace.Error(), "no space left on device: ")
	default:
		why = Errno(err).Text()
	}
	msg := why
	var op *opError
	if errors.As(err, &op) {
		msg = op.op + " " + displayPath(op.path) + ": " + why
	}
	return oneLine(msg)
}

// oneLine keeps msg to one line of valid UTF-8 within wire.MaxMessageLen bytes. Paths are
// already quoted, so this only guards against what a future caller might add.
func oneLine(msg string) string {
	msg = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, msg)
	if len(msg) > wire.MaxMessageLen {
		cut := wire.MaxMessageLen - len("...")
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	return strings.ToValidUTF8(msg, "?")
}
