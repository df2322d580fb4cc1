//go:build !linux

package share

import (
	"io/fs"

	"github.com/peerfs/peerfs/internal/wire"
)

// entryFromInfo converts what lstat or fstat returned, from the portable fields only: elsewhere
// the stat_t layout differs, and Linux is the platform this package is tested on.
func entryFromInfo(fi fs.FileInfo) wire.Entry { return portableEntry(fi) }
