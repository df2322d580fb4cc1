//go:build linux

package conformance

import (
	"io"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// statType records the type and permission bits of path, not followed, and its device
// number.
func statType(o obs, label, path string) {
	var st unix.Stat_t
	err := unix.Lstat(path, &st)
	o(label, errnoName(err))
	if err == nil {
		o(label+" mode", st.Mode)
		o(label+" rdev", st.Rdev)
	}
}

func init() {
	register("special/mkfifo", func(dir string, o obs) {
		p := filepath.Join(dir, "fifo")
		o("mkfifo", errnoName(unix.Mkfifo(p, 0o640)))
		statType(o, "fifo", p)
		o("mkfifo again", errnoName(unix.Mkfifo(p, 0o640)))
		// A writer and a reader on this machine meet through it.
		r, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
		o("open reader", errnoName(err))
		if err != nil {
			return
		}
		defer unix.Close(r)
		w, err := unix.Open(p, unix.O_WRONLY|unix.O_NONBLOCK, 0)
		o("open writer", errnoName(err))
		if err != nil {
			return
		}
		n, err := unix.Write(w, []byte("through"))
		o("write", errnoName(err))
		o("written", n)
		unix.Close(w)
		buf := make([]byte, 16)
		n, err = unix.Read(r, buf)
		o("read", errnoName(err))
		o("data", string(buf[:max(n, 0)]))
	})
	register("special/mknod-fifo-socket-regular", func(dir string, o obs) {
		for _, c := range []struct {
			name string
			mode uint32
		}{{"fifo", unix.S_IFIFO | 0o600}, {"sock", unix.S_IFSOCK | 0o644}, {"reg", unix.S_IFREG | 0o640}, {"plain", 0o640}} {
			p := filepath.Join(dir, c.name)
			o(c.name+" mknod", errnoName(unix.Mknod(p, c.mode, 0)))
			statType(o, c.name, p)
		}
		o("mknod over a name", errnoName(unix.Mknod(filepath.Join(dir, "fifo"), unix.S_IFIFO|0o600, 0)))
		o("mknod of a directory", errnoName(unix.Mknod(filepath.Join(dir, "dir"), unix.S_IFDIR|0o755, 0)))
	})
	register("special/unix-socket", func(dir string, o obs) {
		p := filepath.Join(dir, "listener")
		l, err := net.Listen("unix", p)
		o("bind", errnoName(err))
		if err != nil {
			return
		}
		defer l.Close()
		statType(o, "socket", p)
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Write([]byte("hello"))
				c.Close()
			}
		}()
		c, err := net.Dial("unix", p)
		o("connect", errnoName(err))
		if err != nil {
			return
		}
		b, err := io.ReadAll(c)
		c.Close()
		o("read", errnoName(err))
		o("data", string(b))
		_, err = net.Listen("unix", p)
		o("bind again", errnoName(err))
		o("unlink", errnoName(os.Remove(p)))
	})
	register("special/mknod-device", func(dir string, o obs) {
		for _, c := range []struct {
			name string
			mode uint32
			dev  uint64
		}{{"null", unix.S_IFCHR | 0o666, unix.Mkdev(1, 3)}, {"loop", unix.S_IFBLK | 0o660, unix.Mkdev(7, 200)}} {
			p := filepath.Join(dir, c.name)
			o(c.name+" mknod", errnoName(unix.Mknod(p, c.mode, int(c.dev))))
			statType(o, c.name, p)
		}
	}, needRoot())
}
