//go:build linux

package conformance

import (
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fsyncPath opens path with flags, fsyncs (or fdatasyncs) it and closes it.
func fsyncPath(o obs, label, path string, flags int, data bool) {
	fd, err := unix.Open(path, flags, 0)
	o(label+" open", errnoName(err))
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if data {
		o(label+" fdatasync", errnoName(unix.Fdatasync(fd)))
	} else {
		o(label+" fsync", errnoName(unix.Fsync(fd)))
	}
}

func init() {
	// git, sqlite and PostgreSQL fsync a directory after creating or renaming in it.
	register("ops/fsync-dir", func(dir string, o obs) {
		fd, err := unix.Open(filepath.Join(dir, "new"), unix.O_CREAT|unix.O_WRONLY, 0o644)
		o("create", errnoName(err))
		fsyncPath(o, "dir", dir, unix.O_RDONLY|unix.O_DIRECTORY, false)
		fsyncPath(o, "dir", dir, unix.O_RDONLY|unix.O_DIRECTORY, true)
		if err == nil {
			o("file fsync", errnoName(unix.Fsync(fd)))
			unix.Close(fd)
		}
		o("rename", errnoName(unix.Rename(filepath.Join(dir, "new"), filepath.Join(dir, "renamed"))))
		fsyncPath(o, "after rename", dir, unix.O_RDONLY|unix.O_DIRECTORY, false)
		fsyncPath(o, "O_PATH", dir, unix.O_PATH|unix.O_DIRECTORY, false)
	})
	register("ops/fsync-file-readonly", func(dir string, o obs) {
		p := filepath.Join(dir, "f")
		fd, err := unix.Open(p, unix.O_CREAT|unix.O_WRONLY, 0o644)
		o("create", errnoName(err))
		if err == nil {
			unix.Write(fd, []byte("data"))
			unix.Close(fd)
		}
		fsyncPath(o, "rdonly", p, unix.O_RDONLY, false)
		fsyncPath(o, "rdonly", p, unix.O_RDONLY, true)
	})
}
