package watch

import (
	"io/fs"

	"github.com/peerfs/peerfs/internal/wire"
)

// portableEntry describes fi from the portable fields only (type, permission and set-id bits,
// size, mtime); EntryOf adds what each system's stat offers beyond them.
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
	return wire.Entry{Mode: mode, Size: uint64(max(fi.Size(), 0)), MtimeNs: fi.ModTime().UnixNano()}
}
