package share

import (
	"io/fs"
	"syscall"

	"github.com/peerfs/peerfs/internal/watch"
	"github.com/peerfs/peerfs/internal/wire"
)

// entryFromInfo converts what lstat or fstat returned, with the conversion change events use
// (watch.EntryOf), so events and STAT replies always agree.
func entryFromInfo(fi fs.FileInfo) wire.Entry {
	if _, ok := fi.Sys().(*syscall.Stat_t); !ok {
		return portableEntry(fi)
	}
	return watch.EntryOf(fi)
}
