//go:build unix

package daemon

import (
	"log/slog"
	"syscall"
)

// fewOpenFiles is the open-file limit under which the daemon warns at start: each link, each
// handshake in progress, each open file a peer reads or writes, and each mount's FUSE device
// takes one; 1,024, a common default, was shown to run out under a burst of 1,100
// connections.
const fewOpenFiles = 4096

// raiseOpenFiles raises the soft open-file limit to the hard limit, so that a burst of
// connections or open files meets EMFILE as late as the system allows. The Go runtime does the
// same for every program since Go 1.19; doing it here keeps the daemon's behaviour independent
// of that, and logs the limit it runs with, with a warning when it is low.
func raiseOpenFiles(log *slog.Logger) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the open-file limit", "err", err)
		return
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = raised.Max
		// macOS refuses RLIM_INFINITY as a soft limit (it caps it at OPEN_MAX); then the
		// limit stays as it was.
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			lim = raised
		}
	}
	if uint64(lim.Cur) < fewOpenFiles {
		log.Warn("the open-file limit is low; a burst of connections can exhaust it: raise the hard limit (ulimit -Hn, LimitNOFILE= in a systemd unit)",
			"limit", uint64(lim.Cur), "advised", fewOpenFiles)
		return
	}
	log.Debug("open-file limit", "limit", uint64(lim.Cur))
}
