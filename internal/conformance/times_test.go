//go:build linux

package conformance

import (
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// tick waits long enough for the next change to get a later timestamp than the last on any
// file system here (ext4 takes the time at jiffy granularity, at most 10 ms).
func tick() { time.Sleep(20 * time.Millisecond) }

// lstat returns path's attributes; a failure leaves them zero, and shows as the errno.
func lstat(o obs, label, path string) unix.Stat_t {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		o(label+" lstat", errnoName(err))
	}
	return st
}

// changed records how path's mtime and ctime moved since before, and its link count.
func changed(o obs, label, path string, before unix.Stat_t) unix.Stat_t {
	now := lstat(o, label, path)
	o(label+" mtime", timeRel(now.Mtim, before.Mtim))
	o(label+" ctime", timeRel(now.Ctim, before.Ctim))
	o(label+" nlink", now.Nlink)
	return now
}

// nameOp is an operation on names in a directory, for the directory-times cases.
type nameOp struct {
	name string
	prep func(dir string) // made before the first look at the times
	run  func(dir string) error
}

var nameOps = []nameOp{
	{"create", nil, func(dir string) error {
		fd, err := unix.Open(filepath.Join(dir, "new"), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err == nil {
			err = unix.Close(fd)
		}
		return err
	}},
	{"create-rdonly", nil, func(dir string) error {
		fd, err := unix.Open(filepath.Join(dir, "new"), unix.O_CREAT|unix.O_RDONLY|unix.O_CLOEXEC, 0o644)
		if err == nil {
			err = unix.Close(fd)
		}
		return err
	}},
	{"create-written", nil, func(dir string) error {
		fd, err := unix.Open(filepath.Join(dir, "new"), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err == nil {
			unix.Write(fd, []byte("data"))
			err = unix.Close(fd)
		}
		return err
	}},
	{"mkdir", nil, func(dir string) error { return unix.Mkdir(filepath.Join(dir, "sub"), 0o755) }},
	{"rmdir", func(dir string) { unix.Mkdir(filepath.Join(dir, "sub"), 0o755) },
		func(dir string) error { return unix.Rmdir(filepath.Join(dir, "sub")) }},
	{"symlink", nil, func(dir string) error { return unix.Symlink("target", filepath.Join(dir, "link")) }},
	{"unlink", func(dir string) { touch(filepath.Join(dir, "old")) },
		func(dir string) error { return unix.Unlink(filepath.Join(dir, "old")) }},
	{"link", func(dir string) { touch(filepath.Join(dir, "old")) },
		func(dir string) error { return unix.Link(filepath.Join(dir, "old"), filepath.Join(dir, "new")) }},
	{"rename", func(dir string) { touch(filepath.Join(dir, "old")) },
		func(dir string) error { return unix.Rename(filepath.Join(dir, "old"), filepath.Join(dir, "new")) }},
	{"rename-over", func(dir string) { touch(filepath.Join(dir, "old")); touch(filepath.Join(dir, "new")) },
		func(dir string) error { return unix.Rename(filepath.Join(dir, "old"), filepath.Join(dir, "new")) }},
	{"rename-dir", func(dir string) { unix.Mkdir(filepath.Join(dir, "old"), 0o755) },
		func(dir string) error { return unix.Rename(filepath.Join(dir, "old"), filepath.Join(dir, "new")) }},
}

// touch creates an empty file.
func touch(path string) {
	if fd, err := unix.Open(path, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644); err == nil {
		unix.Close(fd)
	}
}

func init() {
	// A directory's mtime and ctime move at once when a name in it is made, removed or
	// renamed, and its link count counts its subdirectories, as the mount that made the
	// change shows them (they once moved a second or two later, and mkdir left nlink 2).
	for _, op := range nameOps {
		register("times/dir-"+op.name, func(dir string, o obs) {
			d := filepath.Join(dir, "d")
			o("mkdir", errnoName(unix.Mkdir(d, 0o755)))
			if op.prep != nil {
				op.prep(d)
			}
			before := lstat(o, "before", d)
			o("dir nlink before", before.Nlink)
			tick()
			o(op.name, errnoName(op.run(d)))
			changed(o, "dir", d, before)
			// And as seen again later, once every echo of the change came back.
			time.Sleep(1500 * time.Millisecond)
			changed(o, "dir later", d, before)
		})
	}

	// Renaming between directories changes both, and the ctime of what moved.
	register("times/rename-across", func(dir string, o obs) {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		unix.Mkdir(a, 0o755)
		unix.Mkdir(b, 0o755)
		touch(filepath.Join(a, "f"))
		unix.Mkdir(filepath.Join(a, "sub"), 0o755)
		sa, sb := lstat(o, "a", a), lstat(o, "b", b)
		sf, ssub := lstat(o, "f", filepath.Join(a, "f")), lstat(o, "sub", filepath.Join(a, "sub"))
		o("a nlink", sa.Nlink)
		tick()
		o("rename f", errnoName(unix.Rename(filepath.Join(a, "f"), filepath.Join(b, "f"))))
		o("rename sub", errnoName(unix.Rename(filepath.Join(a, "sub"), filepath.Join(b, "sub"))))
		changed(o, "a", a, sa)
		changed(o, "b", b, sb)
		changed(o, "f", filepath.Join(b, "f"), sf)
		changed(o, "sub", filepath.Join(b, "sub"), ssub)
	})
}

func init() {
	// Link counts and ctime of a file as its names come and go.
	register("times/file-links", func(dir string, o obs) {
		a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
		fd, err := unix.Open(a, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		o("create", errnoName(err))
		unix.Write(fd, []byte("data"))
		unix.Close(fd)
		st := lstat(o, "a", a)
		o("a nlink", st.Nlink)
		tick()
		o("link b", errnoName(unix.Link(a, b)))
		st = changed(o, "a after link", a, st)
		changed(o, "b after link", b, st)
		tick()
		o("link c", errnoName(unix.Link(b, c)))
		st = changed(o, "c after link", c, st)
		tick()
		o("unlink a", errnoName(unix.Unlink(a)))
		st = changed(o, "b after unlink", b, st)
		changed(o, "c after unlink", c, st)
		tick()
		o("rename c over b", errnoName(unix.Rename(c, b)))
		changed(o, "b after rename over", b, st)
		tick()
		o("rename b to d", errnoName(unix.Rename(b, filepath.Join(dir, "d"))))
		st = changed(o, "d after rename", filepath.Join(dir, "d"), st)
		var fst unix.Stat_t
		if fd, err := unix.Open(filepath.Join(dir, "d"), unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			unix.Fstat(fd, &fst)
			o("fstat nlink", fst.Nlink)
			o("unlink d while open", errnoName(unix.Unlink(filepath.Join(dir, "d"))))
			unix.Fstat(fd, &fst)
			o("fstat nlink after unlink", fst.Nlink)
			o("fstat ctime after unlink", timeRel(fst.Ctim, st.Ctim))
			unix.Close(fd)
		}
	})

	// truncate and ftruncate move mtime and ctime, also to the same size; open with
	// O_TRUNC of an empty file does not (Linux).
	register("times/truncate", func(dir string, o obs) {
		p := filepath.Join(dir, "f")
		fd, _ := unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		unix.Write(fd, []byte("0123456789"))
		unix.Close(fd)
		st := lstat(o, "f", p)
		for _, step := range []struct {
			label string
			run   func() error
		}{
			{"truncate shorter", func() error { return unix.Truncate(p, 4) }},
			{"truncate same", func() error { return unix.Truncate(p, 4) }},
			{"truncate longer", func() error { return unix.Truncate(p, 100) }},
			{"ftruncate", func() error {
				fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
				if err != nil {
					return err
				}
				defer unix.Close(fd)
				return unix.Ftruncate(fd, 7)
			}},
			{"open O_TRUNC", func() error {
				fd, err := unix.Open(p, unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
				if err == nil {
					err = unix.Close(fd)
				}
				return err
			}},
			{"open O_TRUNC empty", func() error {
				fd, err := unix.Open(p, unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
				if err == nil {
					err = unix.Close(fd)
				}
				return err
			}},
			{"write", func() error {
				fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
				if err != nil {
					return err
				}
				unix.Write(fd, []byte("x"))
				return unix.Close(fd)
			}},
			{"chmod", func() error { return unix.Chmod(p, 0o600) }},
		} {
			tick()
			o(step.label, errnoName(step.run()))
			st = changed(o, step.label, p, st)
			o(step.label+" size", st.Size)
		}
	})

	// utimensat: explicit times, UTIME_NOW and UTIME_OMIT in each place, on files,
	// directories and symlinks; ctime moves with every change.
	register("times/utimensat", func(dir string, o obs) {
		f, d, l := filepath.Join(dir, "f"), filepath.Join(dir, "d"), filepath.Join(dir, "l")
		touch(f)
		unix.Mkdir(d, 0o755)
		unix.Symlink("f", l)
		fixed := unix.Timespec{Sec: 1_500_000_000, Nsec: 123456789}
		fixed2 := unix.Timespec{Sec: 1_400_000_000, Nsec: 987654321}
		now := unix.Timespec{Nsec: unix.UTIME_NOW}
		omit := unix.Timespec{Nsec: unix.UTIME_OMIT}
		for _, p := range []string{f, d, l} {
			name := filepath.Base(p)
			for _, step := range []struct {
				label        string
				atime, mtime unix.Timespec
			}{
				{"fixed", fixed, fixed2},
				{"now now", now, now},
				{"fixed omit", fixed, omit},
				{"omit fixed", omit, fixed},
				{"omit omit", omit, omit},
				{"now omit", now, omit},
				{"omit now", omit, now},
			} {
				before := lstat(o, name, p)
				tick()
				err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{step.atime, step.mtime}, unix.AT_SYMLINK_NOFOLLOW)
				label := name + " " + step.label
				o(label, errnoName(err))
				st := lstat(o, label, p)
				if p != l {
					// The owner reads a link's target to describe it, which moves the
					// link's atime under relatime (docs/ARCHITECTURE.md, differences).
					o(label+" atime", timeRel(st.Atim, before.Atim))
				}
				o(label+" mtime", timeRel(st.Mtim, before.Mtim))
				o(label+" ctime", timeRel(st.Ctim, before.Ctim))
				if step.atime == fixed && p != l {
					o(label+" atime fixed", timeRel(st.Atim, fixed))
				}
				if step.mtime == fixed2 || step.mtime == fixed {
					o(label+" mtime fixed", timeRel(st.Mtim, step.mtime))
				}
			}
		}
	})
}
