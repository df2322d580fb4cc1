//go:build linux

package conformance

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/peerfs/peerfs/internal/api"
)

// The cases run as another user need a mount that lets other users in.
func init() { allowOther = func(p *api.MountParams) { p.AllowOther = true } }

// idsOf records the owner and group of path, not followed.
func idsOf(o obs, label, path string) {
	var st unix.Stat_t
	err := unix.Lstat(path, &st)
	if err != nil {
		o(label, errnoName(err))
		return
	}
	o(label, []uint32{st.Uid, st.Gid})
}

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
	// Every mode bit chmod may set, on a regular file and on a directory (the cases' shares are
	// privileged: others drop set-user-ID and set-group-ID from files, ARCHITECTURE.md).
	for _, m := range []uint32{0o1621, 0o1777, 0o0000, 0o0644, 0o2755, 0o4755, 0o6755, 0o7777} {
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
	register("owner/chown-current-ids", func(dir string, o obs) {
		p := filepath.Join(dir, "f")
		o("create", errnoName(os.WriteFile(p, []byte("x"), 0o644)))
		o("chown same", errnoName(unix.Chown(p, os.Getuid(), os.Getgid())))
		o("chown -1 -1", errnoName(unix.Chown(p, -1, -1)))
		o("lchown same", errnoName(unix.Lchown(p, os.Getuid(), -1)))
		idsOf(o, "ids", p)
	})
	register("owner/chown-other-ids", func(dir string, o obs) {
		p := filepath.Join(dir, "f")
		o("create", errnoName(os.WriteFile(p, []byte("x"), 0o644)))
		o("chown", errnoName(unix.Chown(p, 1234, 4321)))
		idsOf(o, "file", p)
		o("chgrp", errnoName(unix.Chown(p, -1, 55)))
		idsOf(o, "file after chgrp", p)
		o("symlink", errnoName(unix.Symlink("f", filepath.Join(dir, "l"))))
		o("lchown", errnoName(unix.Lchown(filepath.Join(dir, "l"), 66, 77)))
		idsOf(o, "link", filepath.Join(dir, "l"))
		idsOf(o, "target", p)
		o("mkdir", errnoName(unix.Mkdir(filepath.Join(dir, "d"), 0o755)))
		o("chown dir", errnoName(unix.Chown(filepath.Join(dir, "d"), 88, 99)))
		idsOf(o, "dir", filepath.Join(dir, "d"))
	}, needRoot())
	// Run as user 1000: the kernel checks mode bits and chown rights as on a local disk, and
	// what the user makes is its own.
	register("owner/user-creates-own-files", func(dir string, o obs) {
		f := filepath.Join(dir, "f")
		o("create", errnoName(os.WriteFile(f, []byte("one\n"), 0o644)))
		idsOf(o, "file", f)
		o("mkdir", errnoName(unix.Mkdir(filepath.Join(dir, "d"), 0o755)))
		idsOf(o, "dir", filepath.Join(dir, "d"))
		o("create in it", errnoName(os.WriteFile(filepath.Join(dir, "d", "g"), []byte("x"), 0o600)))
		fd, err := unix.Open(f, unix.O_WRONLY|unix.O_APPEND, 0)
		o("reopen for writing", errnoName(err))
		if err == nil {
			unix.Close(fd)
		}
		o("chmod own file", errnoName(unix.Chmod(f, 0o600)))
		modeOf(o, "mode", f)
	}, asUser(1000, 1000))
	register("owner/user-permissions", func(dir string, o obs) {
		f := filepath.Join(dir, "f")
		o("create", errnoName(os.WriteFile(f, []byte("x"), 0o644)))
		o("chmod 0", errnoName(unix.Chmod(f, 0)))
		_, err := unix.Open(f, unix.O_RDONLY, 0)
		o("open mode 0000", errnoName(err))
		o("access R_OK", errnoName(unix.Access(f, unix.R_OK)))
		o("chown to root", errnoName(unix.Chown(f, 0, -1)))
		o("chgrp to own group", errnoName(unix.Chown(f, -1, 1000)))
		o("chgrp to root's group", errnoName(unix.Chown(f, -1, 0)))
		ro := filepath.Join(dir, "ro")
		o("mkdir", errnoName(unix.Mkdir(ro, 0o755)))
		o("chmod 0555", errnoName(unix.Chmod(ro, 0o555)))
		o("create in a 0555 directory", errnoName(os.WriteFile(filepath.Join(ro, "x"), nil, 0o644)))
	}, asUser(1000, 1000))
	register("owner/user-sticky-dir", func(dir string, o obs) {
		tmp := filepath.Join(dir, "tmp")
		o("mkdir", errnoName(unix.Mkdir(tmp, 0o1777)))
		o("chmod 01777", errnoName(unix.Chmod(tmp, 0o1777)))
		modeOf(o, "mode", tmp)
		f := filepath.Join(tmp, "mine")
		o("create", errnoName(os.WriteFile(f, nil, 0o644)))
		o("rename own file", errnoName(unix.Rename(f, filepath.Join(tmp, "moved"))))
		o("unlink own file", errnoName(unix.Unlink(filepath.Join(tmp, "moved"))))
	}, asUser(1000, 1000))
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
