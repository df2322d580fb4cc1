//go:build !linux && !darwin && !freebsd && !windows

package watch

import (
	"io/fs"

	"github.com/peerfs/peerfs/internal/wire"
)

// EntryOf converts what lstat or fstat returned into the attributes peers see, from the
// portable fields only. internal/share describes files with it off Linux, so an event's Entry
// still stands in for a STAT.
func EntryOf(fi fs.FileInfo) wire.Entry { return portableEntry(fi) }
