//go:build linux

package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// createClose creates path with open(2) flags and mode and closes it at once, recording the
// open's errno under label.
func createClose(o obs, label, path string, flags int, mode uint32) {
	fd, err := unix.Open(path, flags|unix.O_CREAT|unix.O_CLOEXEC, mode)
	o(label, errnoName(err))
	if err == nil {
		o(label+" close", errnoName(unix.Close(fd)))
	}
}

// statObs records what stat says of path: its errno, and its type, mode and size.
func statObs(o obs, label, path string) {
	var st unix.Stat_t
	err := unix.Lstat(path, &st)
	o(label, errnoName(err))
	if err == nil {
		o(label+" mode", modeString(st.Mode))
		o(label+" size", st.Size)
		o(label+" nlink", st.Nlink)
	}
}

// modeString shows a st_mode in octal, type bits included.
func modeString(m uint32) string { return "0" + formatOctal(m) }

func formatOctal(m uint32) string {
	if m == 0 {
		return "0"
	}
	var b []byte
	for ; m > 0; m >>= 3 {
		b = append([]byte{byte('0' + m&7)}, b...)
	}
	return string(b)
}

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
		statObs(o, "stat", p)
	})

	// A lock or temp file made with open(O_CREAT|O_RDONLY) and nothing written, removed and
	// made again under the same name, must stay (it once vanished from the mount a second
	// later, never having reached the owner).
	register("create/rdonly-unlink-recreate", func(dir string, o obs) {
		p := filepath.Join(dir, "lock")
		for i := range 3 {
			createClose(o, "create", p, unix.O_RDONLY, 0o644)
			statObs(o, "after create", p)
			if i < 2 {
				o("unlink", errnoName(unix.Unlink(p)))
			}
		}
		// Change events from the owner arrive within this time (tens of milliseconds).
		time.Sleep(1500 * time.Millisecond)
		statObs(o, "a while later", p)
		entries, err := os.ReadDir(dir)
		o("readdir", errnoName(err))
		o("entries", len(entries))
	})

	// The same with the file kept open across the removal of its predecessor's name.
	register("create/wronly-empty-unlink-recreate", func(dir string, o obs) {
		p := filepath.Join(dir, "tmp")
		for range 3 {
			createClose(o, "create", p, unix.O_WRONLY|unix.O_TRUNC, 0o600)
			o("unlink", errnoName(unix.Unlink(p)))
		}
		createClose(o, "create", p, unix.O_WRONLY|unix.O_TRUNC, 0o600)
		time.Sleep(1500 * time.Millisecond)
		statObs(o, "a while later", p)
	})
}

func init() {
	// A file created and still open, nothing written, while the owner's event for the
	// removal of the name's previous file arrives.
	register("create/open-across-old-removal", func(dir string, o obs) {
		p := filepath.Join(dir, "f")
		createClose(o, "create", p, unix.O_RDONLY, 0o644)
		o("unlink", errnoName(unix.Unlink(p)))
		fd, err := unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		o("create again", errnoName(err))
		time.Sleep(1500 * time.Millisecond)
		statObs(o, "while open", p)
		entries, _ := os.ReadDir(dir)
		o("entries while open", len(entries))
		if err == nil {
			o("close", errnoName(unix.Close(fd)))
		}
		statObs(o, "after close", p)
	})
}

// createModes are the modes asked for by the mode cases: none, all and the usual ones. The
// set-user-ID, set-group-ID and sticky bits of regular files follow the owner's policy for
// chmod (share.fileMode) and have cases of their own with it.
var createModes = []uint32{0, 0o777, 0o644, 0o600, 0o640, 0o755, 0o750, 0o111}

// mkdirModes add the bits mkdir(2) takes beyond the permission bits (sticky; set-user-ID
// and set-group-ID it ignores).
var mkdirModes = append([]uint32{0o1777, 0o7777, 0o2755}, createModes...)

func init() {
	// The file's mode is the mode asked for less the umask, exactly (0000 stays 0000).
	for _, umask := range []int{0o022, 0o077, 0, 0o027} {
		register(fmt.Sprintf("create/mode-umask-%03o", umask), func(dir string, o obs) {
			unix.Umask(umask)
			for _, mode := range createModes {
				for _, flags := range []int{unix.O_WRONLY, unix.O_RDONLY, unix.O_RDWR | unix.O_EXCL} {
					p := filepath.Join(dir, fmt.Sprintf("f%o-%d", mode, flags))
					label := fmt.Sprintf("open %#o flags %#x", mode, flags)
					createClose(o, label, p, flags, mode)
					statObs(o, label+" stat", p)
				}
			}
			for _, mode := range mkdirModes {
				p := filepath.Join(dir, fmt.Sprintf("d%o", mode))
				label := fmt.Sprintf("mkdir %#o", mode)
				o(label, errnoName(unix.Mkdir(p, mode)))
				statObs(o, label+" stat", p)
			}
		})
	}

	// A file written before close keeps its mode too.
	register("create/mode-written", func(dir string, o obs) {
		for _, mode := range createModes {
			p := filepath.Join(dir, fmt.Sprintf("f%o", mode))
			fd, err := unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, mode)
			o(fmt.Sprintf("open %#o", mode), errnoName(err))
			if err != nil {
				continue
			}
			var st unix.Stat_t
			unix.Fstat(fd, &st)
			o("fstat while open", modeString(st.Mode))
			unix.Write(fd, []byte("data"))
			o("close", errnoName(unix.Close(fd)))
			statObs(o, "stat", p)
		}
	})
}

func init() {
	// Set-user-ID and set-group-ID asked for at create, on regular files. (The sticky bit of
	// regular files follows share.fileMode, as chmod does.)
	register("create/mode-special-bits", func(dir string, o obs) {
		unix.Umask(0)
		for _, mode := range []uint32{0o4755, 0o2755, 0o6755} {
			p := filepath.Join(dir, fmt.Sprintf("f%o", mode))
			createClose(o, fmt.Sprintf("open %#o", mode), p, unix.O_WRONLY, mode)
			statObs(o, fmt.Sprintf("stat %#o", mode), p)
		}
	}, differsBecause("a mount never sets set-user-ID or set-group-ID on a regular file (docs/ARCHITECTURE.md)"))
}
