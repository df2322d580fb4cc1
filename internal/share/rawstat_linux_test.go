package share

import (
	"io/fs"
	"syscall"

	"github.com/peerfs/peerfs/internal/wire"
)

// rawEntry is what Stat should report for fi, straight from the host's stat_t.
func rawEntry(fi fs.FileInfo) (wire.Entry, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return wire.Entry{}, false
	}
	return wire.Entry{
		Mode: st.Mode, Size: uint64(st.Size),
		MtimeNs: st.Mtim.Nano(), AtimeNs: st.Atim.Nano(), CtimeNs: st.Ctim.Nano(),
		Ino: st.Ino, Nlink: uint32(st.Nlink), UID: st.Uid, GID: st.Gid,
	}, true
}
