//go:build linux

package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// inoOf returns path's inode number, 0 when stat fails.
func inoOf(path string) uint64 {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return 0
	}
	return st.Ino
}

// sameIno says whether b is the inode number a, for observations.
func sameIno(a, b uint64) string {
	if a == 0 || b == 0 {
		return "stat failed"
	}
	if a == b {
		return "same"
	}
	return "different"
}

// direntIno returns the d_ino readdir gives for name in dir, 0 when it is not listed.
func direntIno(dir, name string) uint64 {
	f, err := os.Open(dir)
	if err != nil {
		return 0
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Getdents(int(f.Fd()), buf)
		if err != nil || n <= 0 {
			return 0
		}
		for b := buf[:n]; len(b) > 0; {
			reclen := int(b[16]) | int(b[17])<<8
			ino := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
				uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
			nameBytes := b[19:reclen]
			if i := indexByte(nameBytes, 0); i >= 0 {
				nameBytes = nameBytes[:i]
			}
			if string(nameBytes) == name {
				return ino
			}
			b = b[reclen:]
		}
	}
}

// forgetInodes makes the kernel drop the dentries and inodes it does not use (of every file
// system; it costs other programs nothing but lookups), and gives its FORGETs time to land.
func forgetInodes() {
	os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0)
	time.Sleep(300 * time.Millisecond)
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func init() {
	// st_ino is the file's for its whole life: git, rsync -H, tar and find -inum rely on it.
	// A file created through the mount once showed a provisional number until its inode was
	// forgotten (after a rename's change event), then the owner's.
	register("attr/ino-stable", func(dir string, o obs) {
		p := filepath.Join(dir, "f")
		fd, err := unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		o("create", errnoName(err))
		if err != nil {
			return
		}
		var st unix.Stat_t
		unix.Fstat(fd, &st)
		first := st.Ino
		unix.Write(fd, []byte("data"))
		o("close", errnoName(unix.Close(fd)))
		o("ino after close", sameIno(first, inoOf(p)))
		o("ino listed", sameIno(first, direntIno(dir, "f")))
		q := filepath.Join(dir, "g")
		o("rename", errnoName(unix.Rename(p, q)))
		o("ino after rename", sameIno(first, inoOf(q)))
		time.Sleep(1500 * time.Millisecond) // the rename's change events come back
		o("ino a while later", sameIno(first, inoOf(q)))
		o("ino listed later", sameIno(first, direntIno(dir, "g")))
		o("link", errnoName(unix.Link(q, p)))
		o("ino of link", sameIno(first, inoOf(p)))
	})

	// The same when the kernel forgets the inode between two looks (as under memory
	// pressure): the mount must give the file the number it gave it before.
	register("attr/ino-stable-forgotten", func(dir string, o obs) {
		for _, flags := range []int{unix.O_WRONLY, unix.O_RDONLY} {
			p := filepath.Join(dir, fmt.Sprint("f", flags))
			fd, err := unix.Open(p, unix.O_CREAT|flags|unix.O_CLOEXEC, 0o644)
			o("create", errnoName(err))
			if err != nil {
				return
			}
			var st unix.Stat_t
			unix.Fstat(fd, &st)
			o("close", errnoName(unix.Close(fd)))
			forgetInodes()
			o("ino after forget", sameIno(st.Ino, inoOf(p)))
			o("ino listed after forget", sameIno(st.Ino, direntIno(dir, filepath.Base(p))))
		}
	}, needRoot())

	// The same for an empty file made with open(O_CREAT|O_RDONLY).
	register("attr/ino-stable-empty", func(dir string, o obs) {
		p := filepath.Join(dir, "f")
		fd, err := unix.Open(p, unix.O_CREAT|unix.O_RDONLY|unix.O_CLOEXEC, 0o644)
		o("create", errnoName(err))
		if err != nil {
			return
		}
		var st unix.Stat_t
		unix.Fstat(fd, &st)
		first := st.Ino
		o("close", errnoName(unix.Close(fd)))
		o("ino after close", sameIno(first, inoOf(p)))
		q := filepath.Join(dir, "g")
		o("rename", errnoName(unix.Rename(p, q)))
		time.Sleep(1500 * time.Millisecond)
		o("ino a while later", sameIno(first, inoOf(q)))
	})
}

func init() {
	// A file open when its last name goes keeps working through its descriptors, also when
	// it had other names before (the mount once judged "last name" by a link count it had
	// seen before the other name went, deleted the file on the owner, and the descriptor's
	// writes and xattrs failed with ENOENT).
	register("attr/open-file-loses-last-name", func(dir string, o obs) {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		touch(a)
		o("link", errnoName(unix.Link(a, b)))
		o("truncate a", errnoName(unix.Truncate(a, 0)))
		o("unlink a", errnoName(unix.Unlink(a)))
		fd, err := unix.Open(b, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		o("open b", errnoName(err))
		if err != nil {
			return
		}
		defer unix.Close(fd)
		_, err = unix.Write(fd, []byte("before"))
		o("write", errnoName(err))
		o("unlink b", errnoName(unix.Unlink(b)))
		_, err = unix.Write(fd, []byte(" after"))
		o("write after unlink", errnoName(err))
		o("fsetxattr after unlink", errnoName(unix.Fsetxattr(fd, "user.k", []byte("v"), 0)))
		o("fsync after unlink", errnoName(unix.Fsync(fd)))
		var st unix.Stat_t
		o("fstat", errnoName(unix.Fstat(fd, &st)))
		o("nlink", st.Nlink)
		o("size", st.Size)
		entries, _ := os.ReadDir(dir)
		o("entries", len(entries))
	})
}
