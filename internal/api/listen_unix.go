//go:build unix

package api

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"
)

// listenPrivate binds the Unix socket at path with mode 0600. The directory is already
// private, so the umask only closes the window between bind and chmod; the chmod makes the
// mode certain whatever the umask was. Listen runs before the daemon starts other work, so
// the process-wide umask change touches nothing else.
func listenPrivate(path string) (net.Listener, error) {
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("securing %s: %w", path, err)
	}
	return l, nil
}

// fileOwner returns the uid that owns fi.
func fileOwner(fi fs.FileInfo) (uid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// removeStale removes a socket at path that no daemon answers on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket: remove it", path)
	}
	c, err := dialControl(path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("a daemon is already running for this home (socket %s)", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	return nil
}

// dialControl connects to the control socket at path.
func dialControl(path string, timeout time.Duration) (net.Conn, error) {
	if timeout == 0 {
		return net.Dial("unix", path)
	}
	return net.DialTimeout("unix", path, timeout)
}

// errNoListener reports whether a dial error means nothing listens at the path.
func errNoListener(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED)
}
