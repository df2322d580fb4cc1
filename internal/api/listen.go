package api

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/gofrs/flock"
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
	lf := flock.New(lockPath, flock.SetPermissions(0o600))
	locked, err := lf.TryLock()
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", lockPath, err)
	}
	if !locked {
		return nil, fmt.Errorf("a daemon is already running for this home (socket %s)", path)
	}

	if err := removeStale(path); err != nil {
		lf.Close()
		return nil, err
	}

	l, err := listenPrivate(path)
	if err != nil {
		lf.Close()
		return nil, err
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
	if uid, ok := fileOwner(fi); ok && uid != os.Getuid() {
		return fmt.Errorf("runtime directory %s belongs to uid %d, not to you: remove it or use another --home", dir, uid)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("securing runtime directory: %w", err)
		}
	}
	return nil
}

// socketListener releases the lock after the socket is closed (and so removed).
type socketListener struct {
	net.Listener
	lock *flock.Flock
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
