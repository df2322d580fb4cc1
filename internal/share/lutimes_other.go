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

// futimes sets the atime and mtime of the open file f, by its name.
func futimes(f *os.File, atime, mtime time.Time) error { return os.Chtimes(f.Name(), atime, mtime) }
