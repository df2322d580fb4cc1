//go:build !linux

package fusefs

import (
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

func probePassthrough(srv *fuse.Server) (why string) { return "FUSE passthrough exists only on Linux" }

func setKernelReadahead(dir string, bytes int64) error { return nil }

// killPrivCaps: HANDLE_KILLPRIV_V2 is Linux's; elsewhere the kernel drops setuid and setgid
// bits on writes itself.
const killPrivCaps = 0

// openDirect: macOS and the BSDs have no O_DIRECT open flag (macOS sets F_NOCACHE on the
// descriptor instead, which FUSE does not pass on), so every open fills the page cache.
const openDirect = 0

// errNoAttr is the errno of an absent extended attribute: ENOATTR on macOS and the BSDs.
const errNoAttr = unix.ENOATTR
