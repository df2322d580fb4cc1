package transfer

import "os"

// oNoFollow: Windows has no O_NOFOLLOW; os.Root still refuses a link that leads out of the
// destination.
const oNoFollow = 0

// oDirectory: Windows opens a directory with plain O_RDONLY.
const oDirectory = 0

// syncDirFile: NTFS journals its directory entries, and FlushFileBuffers refuses a directory
// handle opened for reading, so there is nothing to flush by hand.
func syncDirFile(d *os.File) error { return nil }
