package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strings"
	"time"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"
)

// On Windows the control API is a named pipe: AF_UNIX sockets exist only from Windows 10
// 1803 on and not under Wine, and a pipe takes an ACL. The socket path of the home still
// names it: the pipe is \\.\pipe\peerfs-HASH, HASH from the path, so each home has its
// own daemon, and the path's lock file still admits one daemon per home.

// pipeName is the named pipe that stands for the control socket at path.
func pipeName(path string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(path)))
	return `\\.\pipe\peerfs-` + hex.EncodeToString(sum[:10])
}

// listenPrivate creates the pipe with an ACL that admits only the current user and SYSTEM:
// another user of the machine cannot open it.
func listenPrivate(path string) (net.Listener, error) {
	token := windows.GetCurrentProcessToken()
	user, err := token.GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("securing the control pipe: who am I: %w", err)
	}
	sddl := "D:P(A;;GA;;;" + user.User.Sid.String() + ")(A;;GA;;;SY)"
	l, err := winio.ListenPipe(pipeName(path), &winio.PipeConfig{SecurityDescriptor: sddl})
	if err != nil {
		return nil, fmt.Errorf("listening on %s (for %s): %w", pipeName(path), path, err)
	}
	return l, nil
}

// fileOwner: Windows files have an owner SID, not a uid; the directory's ACL is what guards it.
func fileOwner(fs.FileInfo) (uid int, ok bool) { return 0, false }

// removeStale: a pipe leaves nothing behind when its daemon dies; one that answers belongs
// to a running daemon.
func removeStale(path string) error {
	if c, err := dialControl(path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("a daemon is already running for this home (socket %s)", path)
	}
	return nil
}

func dialControl(path string, timeout time.Duration) (net.Conn, error) {
	if timeout == 0 {
		return winio.DialPipe(pipeName(path), nil)
	}
	return winio.DialPipe(pipeName(path), &timeout)
}

// errNoListener reports whether a dial error means no daemon has the pipe open.
func errNoListener(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, windows.ERROR_FILE_NOT_FOUND) ||
		errors.Is(err, winio.ErrTimeout)
}
