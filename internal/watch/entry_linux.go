package watch

import (
	"io/fs"
	"syscall"

	"github.com/peerfs/peerfs/internal/wire"
)

// entryOf converts what Lstat returned into the attributes peers see, field for field as
// internal/share fills them for STAT and READDIR (a test in share compares the two), so an event
// may stand in for a STAT. It is a copy rather than an import: share imports this package, and
// wire stays free of host file systems.
func entryOf(fi fs.FileInfo) wire.Entry {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok { // not from os.Lstat on Linux; keep what FileInfo itself says
		mode := uint32(fi.Mode().Perm())
		switch fi.Mode().Type() {
		case 0:
			mode |= wire.ModeRegular
		case fs.ModeDir:
			mode |= wire.ModeDir
		case fs.ModeSymlink:
			mode |= wire.ModeSymlink
		}
		return wire.Entry{Mode: mode, Size: uint64(max(fi.Size(), 0)), MtimeNs: fi.ModTime().UnixNano()}
	}
	return wire.Entry{
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
