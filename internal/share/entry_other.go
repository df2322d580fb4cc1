//go:build !linux

package share

import (
	"io/fs"

	"github.com/peerfs/peerfs/internal/watch"
	"github.com/peerfs/peerfs/internal/wire"
)

// entryFromInfo converts what lstat or fstat returned, from the portable fields only: elsewhere
// the stat_t layout differs. It is the watcher's conversion (watch.EntryOf), so events and
// STAT replies agree there too.
func entryFromInfo(fi fs.FileInfo) wire.Entry { return watch.EntryOf(fi) }
