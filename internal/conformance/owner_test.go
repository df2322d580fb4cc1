package conformance

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// modeOf records the mode bits (type, set-id, sticky and permissions) of path, not followed.
func modeOf(o obs, label, path string) {
	var st unix.Stat_t
	err := unix.Lstat(path, &st)
	if err != nil {
		o(label, errnoName(err))
		return
	}
	o(label, st.Mode)
}

func init() {
	// Every mode bit chmod may set on a directory; on a regular file, all but set-user-ID and
	// set-group-ID, which the owner drops (docs/ARCHITECTURE.md, differences).
	for _, m := range []uint32{0o1621, 0o1777, 0o0000, 0o0644} {
		mode := m
		register("owner/chmod-file-"+modeName(mode), func(dir string, o obs) {
			p := filepath.Join(dir, "f")
			o("create", errnoName(os.WriteFile(p, []byte("x"), 0o644)))
			o("chmod", errnoName(unix.Chmod(p, mode)))
			modeOf(o, "mode", p)
		})
	}
	for _, m := range []uint32{0o1621, 0o1777, 0o2755, 0o4755, 0o6755, 0o7777, 0o0000} {
		mode := m
		register("owner/chmod-dir-"+modeName(mode), func(dir string, o obs) {
			p := filepath.Join(dir, "d")
			o("mkdir", errnoName(unix.Mkdir(p, 0o755)))
			o("chmod", errnoName(unix.Chmod(p, mode)))
			modeOf(o, "mode", p)
		}, needRoot())
	}
	register("owner/mkdir-sticky", func(dir string, o obs) {
		p := filepath.Join(dir, "tmp")
		o("mkdir", errnoName(unix.Mkdir(p, 0o1777)))
		modeOf(o, "mode", p)
	})
	// A set-group-ID directory passes its group, and to directories the bit, to what is made
	// in it.
	register("owner/setgid-dir-inherits", func(dir string, o obs) {
		p := filepath.Join(dir, "sg")
		o("mkdir", errnoName(unix.Mkdir(p, 0o775)))
		o("chown", errnoName(unix.Chown(p, -1, 4321)))
		o("chmod", errnoName(unix.Chmod(p, 0o2775)))
		modeOf(o, "dir mode", p)
		o("create", errnoName(os.WriteFile(filepath.Join(p, "f"), []byte("x"), 0o644)))
		o("mkdir sub", errnoName(unix.Mkdir(filepath.Join(p, "sub"), 0o755)))
		for _, name := range []string{"f", "sub"} {
			var st unix.Stat_t
			err := unix.Lstat(filepath.Join(p, name), &st)
			o(name+" stat", errnoName(err))
			o(name+" gid", st.Gid)
			o(name+" mode", st.Mode)
		}
	}, needRoot())
}

// modeName writes a mode as four octal digits for a case name.
func modeName(m uint32) string {
	const digits = "01234567"
	return string([]byte{digits[m>>9&7], digits[m>>6&7], digits[m>>3&7], digits[m&7]})
}
