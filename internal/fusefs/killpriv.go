package fusefs

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Setuid and setgid bits on writes (FUSE_HANDLE_KILLPRIV_V2).
//
// A write or truncate by an unprivileged process drops a file's setuid bit, and its setgid
// bit when the group may execute it, as on a local filesystem. Without HANDLE_KILLPRIV_V2 the
// kernel does this itself, and to learn whether the file carries file capabilities it asks
// for security.capability before every write: a GETXATTR for each WRITE, half the requests of
// a small-write workload. With it, the kernel leaves the bits to the filesystem and asks once
// per file at most. The mount then drops them itself, from the mode its replica knows, with a
// SETATTR to the owner before the first write of each open and with the truncate. File
// capabilities need nothing here: a share serves no security.* attributes, and the owner's
// kernel drops them from a file the daemon writes.

// killedMode returns the permission bits of mode (a wire.Entry's, type bits included)
// without those that a write or truncate by an unprivileged process drops, and whether there
// were any: setuid, and setgid when the group may execute.
func killedMode(mode uint32) (uint32, bool) {
	// POSIX's values, spelled out: not every system's syscall package names S_IXGRP.
	const setuid, setgid, groupExec = 0o4000, 0o2000, 0o010
	mode &= 0o7777
	kill := mode & setuid
	if mode&(setgid|groupExec) == setgid|groupExec {
		kill |= setgid
	}
	return mode &^ kill, kill != 0
}

// mayKeepPrivs reports whether the caller keeps setuid and setgid bits when it writes: a
// process with CAP_FSETID does. The kernel tells which callers lack it in the WRITE's flags,
// which go-fuse does not pass on, so the caller's effective capabilities are read from
// /proc; where they cannot be, uid 0 is taken for CAP_FSETID. It is asked only of files that
// carry such bits, which are rare.
func mayKeepPrivs(ctx context.Context) bool {
	caller, ok := fuse.FromContext(ctx)
	if !ok {
		return false
	}
	if caps, ok := effectiveCaps(caller.Pid); ok {
		return caps&(1<<capFsetid) != 0
	}
	return caller.Uid == 0
}

// capFsetid is CAP_FSETID's number (linux/capability.h).
const capFsetid = 4

// effectiveCaps returns the CapEff mask of process pid.
func effectiveCaps(pid uint32) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return caps, err == nil
		}
	}
	return 0, false
}

// killPrivs drops the setuid and setgid bits of n before an unprivileged caller's write
// changes it, when the replica knows the file has them. The kernel learns the new mode at
// once.
func (n *Node) killPrivs(ctx context.Context) syscall.Errno {
	e, known := n.root.replica.Stat(n.path())
	if !known {
		return 0
	}
	mode, kill := killedMode(e.Mode)
	if !kill || mayKeepPrivs(ctx) { // the mode first: mayKeepPrivs reads /proc
		return 0
	}
	in := &fuse.SetAttrIn{}
	in.Valid, in.Mode = fuse.FATTR_MODE, mode
	if errno := n.Setattr(ctx, nil, in, &fuse.AttrOut{}); errno != 0 {
		return errno
	}
	go n.NotifyContent(-1, 0) // attributes only; from another goroutine, as in dropKernelPages
	return 0
}
