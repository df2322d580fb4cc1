//go:build unix

package api

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
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

func isSocket(fi fs.FileInfo) bool { return fi.Mode().Type() == fs.ModeSocket }
