package watch

import (
	"io/fs"
	"syscall"

	"github.com/peerfs/peerfs/internal/wire"
)

// EntryOf converts what lstat or fstat returned into the attributes peers see. It is the one
// conversion on Linux: internal/share uses it for STAT and READDIR (share imports this package;
// wire stays free of host file systems), so an event's Entry may stand in for a STAT. The raw
// stat_t keeps set-id and sticky bits and nanosecond times exactly.
func EntryOf(fi fs.FileInfo) wire.Entry {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok { // not from os.Lstat on Linux; keep what FileInfo itself says
		return portableEntry(fi)
	}
	e := wire.Entry{
		Mode:    typeBits(st.Mode&syscall.S_IFMT) | st.Mode&wire.ModePermMask,
		Size:    uint64(max(st.Size, 0)),
		MtimeNs: st.Mtim.Nano(),
		AtimeNs: st.Atim.Nano(),
		CtimeNs: st.Ctim.Nano(),
		Ino:     st.Ino,
		Nlink:   uint32(st.Nlink),
		UID:     st.Uid,
		GID:     st.Gid,
	}
	if t := st.Mode & syscall.S_IFMT; t == syscall.S_IFCHR || t == syscall.S_IFBLK {
		e.Rdev = st.Rdev
	}
	return e
}

// typeBits maps the host's S_IFMT value to the wire's fixed type bits.
func typeBits(t uint32) uint32 {
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
