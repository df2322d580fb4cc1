package share

import (
	"io/fs"

	"github.com/peerfs/peerfs/internal/wire"
)

// portableEntry builds an Entry from fs.FileMode and ModTime alone, for hosts (or FileInfo
// values) without a usable stat_t.
func portableEntry(fi fs.FileInfo) wire.Entry {
	m := fi.Mode()
	var mode uint32
	switch m.Type() {
	case fs.ModeDir:
		mode = wire.ModeDir
	case 0:
		mode = wire.ModeRegular
	case fs.ModeSymlink:
		mode = wire.ModeSymlink
	case fs.ModeNamedPipe:
		mode = wire.ModeFIFO
	case fs.ModeSocket:
		mode = wire.ModeSocket
	case fs.ModeDevice | fs.ModeCharDevice:
		mode = wire.ModeChar
	case fs.ModeDevice:
		mode = wire.ModeBlock
	}
	mode |= uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	e := wire.Entry{Mode: mode, MtimeNs: fi.ModTime().UnixNano()}
	if fi.Size() > 0 {
		e.Size = uint64(fi.Size())
	}
	return e
}

// fileMode converts wire permission bits to an fs.FileMode for chmod and create. A directory
// keeps every bit (set-group-ID passes its group on to what is created in it; set-user-ID
// means nothing on one); a file keeps the sticky bit and loses set-user-ID and set-group-ID:
// a peer must not be able to plant a program on the owner's disk that runs with the owner's
// or the group's rights (Share.permFor keeps them in a privileged share).
func fileMode(mode uint32, isDir bool) fs.FileMode {
	m := fs.FileMode(mode & 0o777)
	if mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	if isDir && mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if isDir && mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	return m
}

// permFor is fileMode, with a file's set-user-ID and set-group-ID bits kept in a privileged
// share, whose peers may do what the owner's account may.
func (s *Share) permFor(mode uint32, isDir bool) fs.FileMode {
	m := fileMode(mode, isDir)
	if s.privileged && mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if s.privileged && mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	return m
}
