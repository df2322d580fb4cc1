package share

import (
	"io/fs"

	"github.com/peerfs/peerfs/internal/watch"
	"github.com/peerfs/peerfs/internal/wire"
)

// entryFromInfo converts what lstat or fstat returned with the watcher's conversion
// (watch.EntryOf), so change events and STAT replies always agree, on every system.
func entryFromInfo(fi fs.FileInfo) wire.Entry { return watch.EntryOf(fi) }

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
