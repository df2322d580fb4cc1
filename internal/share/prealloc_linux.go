package share

import (
	"errors"
	"os"
	"syscall"
)

// preallocate reserves size bytes for f without changing its length (FALLOC_FL_KEEP_SIZE), so
// an upload's part file still says by its length how much arrived (the resume offset). Reserving up front
// fails early on a full disk and makes the writes much cheaper on ext4 (BENCHMARKS.md).
// Filesystems without fallocate are fine without it.
func preallocate(f *os.File, size int64) error {
	const keepSize = 0x01 // FALLOC_FL_KEEP_SIZE
	err := syscall.Fallocate(int(f.Fd()), keepSize, 0, size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EINVAL) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}
