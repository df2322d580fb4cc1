//go:build unix

package cache

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir creates (0600) and flocks the lock file, so that a second daemon on the same cache
// directory fails at Open instead of deleting the first one's data files as orphans. The lock
// goes with the process: a crashed daemon leaves none behind.
func lockDir(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, name)
		}
		return nil, fmt.Errorf("cache: locking %s: %w", name, err)
	}
	return f, nil
}
