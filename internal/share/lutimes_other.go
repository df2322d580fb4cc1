//go:build !linux

package share

import (
	"errors"
	"os"
	"time"
)

// lutimesAt is not implemented here: the standard library offers no portable way to set a
// symlink's own times, so SetAttr skips them.
func lutimesAt(dir *os.File, name string, atime, mtime time.Time) error {
	return errors.ErrUnsupported
}
