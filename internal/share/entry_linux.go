package share

import (
	"io/fs"
	"syscall"

	"github.com/peerfs/peerfs/internal/wire"
)

// entryFromInfo converts what lstat or fstat returned. On Linux the raw stat_t is the source, so
// the mode keeps the set-id and sticky bits exactly and the times keep their nanoseconds.
func entryFromInfo(fi fs.FileInfo) wire.Entry {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return portableEntry(fi)
	}
	return wire.Entry{
		Mode:    posixType(st.Mode&syscall.S_IFMT) | st.Mode&wire.ModePermMask,
		Size:    uint64(max(st.Size, 0)),
		MtimeNs: st.Mtim.Nano(),
		AtimeNs: st.Atim.Nano(),
		CtimeNs: st.Ctim.Nano(),
		Ino:     st.Ino,
		Nlink:   uint32(st.Nlink),
		UID:     st.Uid,
		GID:     st.Gid,
	}
}

// posixType maps the host's S_IFMT value to the wire's type bits. They coincide on Linux; the
// explicit table keeps the wire values fixed whatever the host says.
func posixType(t uint32) uint32 {
	switch t {
	case syscall.S_IFDIR:
		return wire.ModeDir
	case syscall.S_IFREG:
		return wire.ModeRegular
	case syscall.S_IFLNK:
		return wire.ModeSymlink
	case syscall.S_IFIFO:
		return wire.ModeFIFO
	case syscall.S_IFSOCK:
		return wire.ModeSocket
	case syscall.S_IFCHR:
		return wire.ModeChar
	case syscall.S_IFBLK:
		return wire.ModeBlock
	}
	return 0
}
