//go:build !unix

package cache

import (
	"fmt"
	"os"
)

// lockDir creates the lock file without locking it: no flock here, and FUSE mounts, the only
// users of the cache, exist only on unix systems anyway.
func lockDir(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	return f, nil
}
