package conformance

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

func init() {
	register("create/excl-twice", func(dir string, o obs) {
		p := filepath.Join(dir, "f")
		fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
		o("first", errnoName(err))
		if err == nil {
			n, err := unix.Write(fd, []byte("hello"))
			o("write", errnoName(err))
			o("written", n)
			unix.Close(fd)
		}
		_, err = unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
		o("second", errnoName(err))
		fi, err := os.Stat(p)
		o("stat", errnoName(err))
		if err == nil {
			o("size", fi.Size())
			o("mode", fi.Mode().String())
		}
	})
}
