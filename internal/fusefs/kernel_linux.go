package fusefs

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
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

// setKernelReadahead sets the kernel's readahead window for the mount's backing device
// info. The kernel starts a FUSE mount at 128 KiB whatever max_readahead the daemon asks
// for, so a sequential reader's FUSE READs stay at 128 KiB: eight requests, and eight trips
// through the daemon, per MiB. Only root may raise it (sysfs).
func setKernelReadahead(dir string, bytes int64) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return err
	}
	path := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	return os.WriteFile(path, []byte(strconv.FormatInt(bytes>>10, 10)), 0)
}

// killPrivCaps is the capability the mount negotiates with the kernel (killpriv.go).
const killPrivCaps = fuse.CAP_HANDLE_KILLPRIV_V2

// openDirect is the open flag of a descriptor that bypasses the page cache.
const openDirect = syscall.O_DIRECT

// errNoAttr is the errno of an absent extended attribute.
const errNoAttr = syscall.ENODATA
