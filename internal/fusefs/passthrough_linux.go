package fusefs

import (
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// probePassthrough registers a backing file with the kernel and drops it again: go-fuse falls
// back silently when the kernel refuses one at open, and the user should hear why once.
func probePassthrough(srv *fuse.Server) (why string) {
	if srv.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		return "the kernel does not offer it (Linux 6.9 or later with CONFIG_FUSE_PASSTHROUGH)"
	}
	f, err := os.CreateTemp("", "peerfs-passthrough-probe-")
	if err != nil {
		return "no temporary file to probe with: " + err.Error()
	}
	os.Remove(f.Name())
	defer f.Close()
	id, errno := srv.RegisterBackingFd(&fuse.BackingMap{Fd: int32(f.Fd())})
	if errno != 0 {
		if errno == syscall.EPERM {
			return "registering a backing file needs root (CAP_SYS_ADMIN)"
		}
		return "registering a backing file failed: " + errno.Error()
	}
	srv.UnregisterBackingFd(id)
	return ""
}
