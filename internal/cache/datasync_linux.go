package cache

import (
	"os"
	"syscall"
)

// datasync flushes f's data, not its timestamps: fdatasync is enough for the record's promise
// (the bytes it calls present are on disk) and skips a journal commit for mtime.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
