package prealloc

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Reserve reserves [off, off+n) of f without changing its length (FALLOC_FL_KEEP_SIZE), so a
// part file's length still says how much arrived. It first compares what the range still
// lacks with the free space and refuses with a
// *NoSpaceError, reserving nothing, if it does not fit. If fallocate still fails for want of
// space (another writer took it meanwhile), what it managed to allocate is given back (ext4
// keeps a partial allocation) and a *NoSpaceError is returned. Filesystems without fallocate
// are fine without it.
func Reserve(f *os.File, off, n int64) error {
	if n <= 0 {
		return nil
	}
	need, free, err := shortfall(f, off, n)
	if err != nil {
		return err
	}
	if need > free {
		return &NoSpaceError{Need: need, Free: free}
	}
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EINVAL):
		return nil
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		if rerr := Release(f, off+n); rerr != nil {
			return rerr
		}
		need, free, serr := shortfall(f, off, n)
		if serr != nil || need <= free {
			// Someone else's writes came and went: report the space seen before.
			need, free = off+n, 0
		}
		return &NoSpaceError{Need: need, Free: free}
	}
	return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
}

// shortfall returns how many bytes f may still lack to hold [off, off+n) and how many its
// filesystem has free for unprivileged users. What f holds already counts only for a range
// from the start (an upload's resumed prefix); for a range further on (a sparse cache file)
// the whole range is counted, which may overstate but never understates it.
func shortfall(f *os.File, off, n int64) (need, free int64, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, 0, &os.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil {
		return 0, 0, &os.PathError{Op: "fstatfs", Path: f.Name(), Err: err}
	}
	// Block counts are in units of the fragment size where there is one (statvfs(3)).
	unit := int64(fs.Frsize)
	if unit == 0 {
		unit = int64(fs.Bsize)
	}
	return max(min(n, off+n-st.Blocks*512), 0), int64(fs.Bavail) * unit, nil
}

// Release gives back the blocks f holds past its length, up to end (the end of the range
// reserved): a reservation that was refused, failed or whose transfer stopped before it was
// filled. Truncating a file to its own length frees what it holds past it and keeps its data:
// ext4 and tmpfs truncate even when the length does not change, for this purpose (ext4 does
// not punch holes past the length).
func Release(f *os.File, end int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if end <= fi.Size() {
		return nil
	}
	return f.Truncate(fi.Size())
}
