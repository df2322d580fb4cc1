//go:build darwin || freebsd

package watch

import (
	"io/fs"
	"syscall"

	"github.com/peerfs/peerfs/internal/wire"
)

// EntryOf converts what lstat or fstat returned into the attributes peers see: the portable
// fields, and from the stat_t the inode number (a mount tells files apart by it: two files
// with one number would be one file to the kernel), link count, owner and nanosecond times.
// internal/share describes files with it off Linux, so an event's Entry stands in for a STAT.
func EntryOf(fi fs.FileInfo) wire.Entry {
	e := portableEntry(fi)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Ino, e.Nlink, e.UID, e.GID = st.Ino, uint32(st.Nlink), st.Uid, st.Gid
		e.MtimeNs, e.AtimeNs, e.CtimeNs = st.Mtimespec.Nano(), st.Atimespec.Nano(), st.Ctimespec.Nano()
	}
	return e
}
