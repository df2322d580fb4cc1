package api

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Listen creates the control socket at path, mode 0600, in a directory it creates (or
// tightens) to mode 0700. Only one daemon may serve a socket: Listen holds an exclusive lock
// on path+".lock" for the listener's life and refuses with "a daemon is already running" when
// another process holds it or answers on the socket. A socket file left by a daemon that died
// is removed. Closing the listener removes the socket and releases the lock.
func Listen(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := ensurePrivateDir(dir); err != nil {
		return nil, err
	}

	lockPath := path + ".lock"
	lf, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", lockPath, err)
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lf.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("a daemon is already running for this home (socket %s)", path)
		}
		return nil, fmt.Errorf("locking %s: %w", lockPath, err)
	}

	if err := removeStale(path); err != nil {
		lf.Close()
		return nil, err
	}

	// The directory is already private, so the umask only closes the window between bind
	// and chmod; the chmod makes the mode certain whatever the umask was. Listen runs before
	// the daemon starts other work, so the process-wide umask change touches nothing else.
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		lf.Close()
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		lf.Close()
		return nil, fmt.Errorf("securing %s: %w", path, err)
	}
	return &socketListener{Listener: l, lock: lf}, nil
}

// ensurePrivateDir creates dir with mode 0700, or checks an existing one is a directory owned
// by us and sets its mode to 0700. A directory owned by someone else (a planted
// /tmp/peerfs-UID) is refused.
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating runtime directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("runtime directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("runtime directory %s is not a directory: remove it", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("runtime directory %s belongs to uid %d, not to you: remove it or use another --home", dir, st.Uid)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("securing runtime directory: %w", err)
		}
	}
	return nil
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
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("a daemon is already running for this home (socket %s)", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	return nil
}

// socketListener releases the lock after the socket is closed (and so removed).
type socketListener struct {
	net.Listener
	lock *os.File
	once sync.Once
	err  error
}

func (l *socketListener) Close() error {
	l.once.Do(func() {
		l.err = l.Listener.Close()
		l.lock.Close()
	})
	return l.err
}
