//go:build linux

package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// nameOf returns a name of n bytes.
func nameOf(n int, c byte) string { return strings.Repeat(string(c), n) }

// sharePathLimit is why paths long from the share's root differ: the case directory's own
// name counts in the mount and not on the local disk.
const sharePathLimit = "a path in a share is at most PATH_MAX (4096) bytes from the share's root " +
	"(ENAMETOOLONG past it, at once); a local disk limits only the path given to one call"

func init() {
	// Names of NAME_MAX (255) bytes work for every kind of entry; one more is ENAMETOOLONG.
	register("names/name-max", func(dir string, o obs) {
		for _, n := range []int{254, 255, 256, 300} {
			name := filepath.Join(dir, nameOf(n, 'f'))
			label := fmt.Sprint(n, " ")
			createClose(o, label+"create", name, unix.O_WRONLY, 0o644)
			statObs(o, label+"stat", name)
			o(label+"mkdir", errnoName(unix.Mkdir(filepath.Join(dir, nameOf(n, 'd')), 0o755)))
			o(label+"symlink", errnoName(unix.Symlink("target", filepath.Join(dir, nameOf(n, 's')))))
			o(label+"symlink to long", errnoName(unix.Symlink(nameOf(n, 'f'), filepath.Join(dir, fmt.Sprint("s", n)))))
			touch(filepath.Join(dir, "src"))
			o(label+"link", errnoName(unix.Link(filepath.Join(dir, "src"), filepath.Join(dir, nameOf(n, 'l')))))
			o(label+"rename to", errnoName(unix.Rename(filepath.Join(dir, "src"), filepath.Join(dir, nameOf(n, 'r')))))
			o(label+"rename from", errnoName(unix.Rename(filepath.Join(dir, nameOf(n, 'r')), filepath.Join(dir, "back"))))
			o(label+"unlink", errnoName(unix.Unlink(name)))
			unix.Unlink(filepath.Join(dir, "back"))
		}
		entries, err := os.ReadDir(dir)
		o("readdir", errnoName(err))
		o("entries", len(entries))
	})

	// A path given to a system call is at most PATH_MAX (4096) bytes with its terminating
	// NUL: a relative path of 4095 bytes works, of 4096 is ENAMETOOLONG.
	register("names/path-max", func(dir string, o obs) {
		o("chdir", errnoName(unix.Chdir(dir)))
		// 15 levels of 255-byte names and slashes: 3840 bytes.
		rel := ""
		for i := range 15 {
			rel = filepath.Join(rel, nameOf(255, byte('a'+i)))
			if err := unix.Mkdir(rel, 0o755); err != nil {
				o(fmt.Sprint("mkdir level ", i), errnoName(err))
				return
			}
		}
		for _, total := range []int{4094, 4095, 4096, 4200} {
			name := nameOf(total-len(rel)-1, 'x')
			p := rel + "/" + name
			label := fmt.Sprint(len(p), " ")
			createClose(o, label+"create", p, unix.O_WRONLY, 0o644)
			statObs(o, label+"stat", p)
			o(label+"mkdir", errnoName(unix.Mkdir(p+"d", 0o755)))
			o(label+"rename", errnoName(unix.Rename(p, p[:len(p)-1]+"y")))
			o(label+"unlink", errnoName(unix.Unlink(p[:len(p)-1]+"y")))
		}
	}, differsBecause(sharePathLimit))

	// Below PATH_MAX from the process's working directory, a tree can be deeper than
	// PATH_MAX from its root (ext4 has no limit on depth): the mount must not refuse what
	// the owner's share path makes long.
	register("names/deeper-than-path-max", func(dir string, o obs) {
		o("chdir", errnoName(unix.Chdir(dir)))
		for i := range 24 { // 24 levels of 200 bytes: 4824 bytes from the case directory
			name := nameOf(200, byte('a'+i))
			if err := unix.Mkdir(name, 0o755); err != nil {
				o(fmt.Sprint("mkdir level ", i), errnoName(err))
				return
			}
			if err := unix.Chdir(name); err != nil {
				o(fmt.Sprint("chdir level ", i), errnoName(err))
				return
			}
		}
		createClose(o, "create", "f", unix.O_WRONLY, 0o644)
		statObs(o, "stat", "f")
		fd, err := unix.Open("g", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		o("create written", errnoName(err))
		if err == nil {
			unix.Write(fd, []byte("data"))
			o("close", errnoName(unix.Close(fd)))
		}
		data, err := os.ReadFile("g")
		o("read", errnoName(err))
		o("contents", string(data))
		o("rename", errnoName(unix.Rename("f", "h")))
		o("mkdir", errnoName(unix.Mkdir("sub", 0o755)))
		o("symlink", errnoName(unix.Symlink("h", "l")))
		o("link", errnoName(unix.Link("h", "k")))
		entries, err := os.ReadDir(".")
		o("readdir", errnoName(err))
		o("entries", len(entries))
		o("unlink", errnoName(unix.Unlink("h")))
		o("rmdir", errnoName(unix.Rmdir("sub")))
	}, differsBecause(sharePathLimit))
}
