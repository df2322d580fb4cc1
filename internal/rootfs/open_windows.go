package rootfs

import "os"

// ODirectory: Windows opens a directory with plain O_RDONLY; os.Root never opens a device.
const ODirectory = 0

// ONoFollow: Windows has no O_NOFOLLOW; os.Root still refuses a link that leads out.
const ONoFollow = 0

// syncDirFile: NTFS journals its directory entries, and FlushFileBuffers refuses a directory
// handle opened for reading.
func syncDirFile(d *os.File) error { return nil }
