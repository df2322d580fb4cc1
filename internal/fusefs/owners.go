package fusefs

// Owners and groups across devices.
//
// The owner's disk numbers users and groups its own way: uid 1000 there may be nobody here.
// With Options.MapIDs (peerfs mount --idmap user, the default) the IDs of the share's folder on
// the owner, taken for the owner's own (sshfs's idmap=user takes the remote folder's the same
// way), show as the mounting user's, and a chown to the mounting user's IDs means the owner's;
// every other ID shows as it is. Without it (--idmap none) every ID shows as the owner numbers
// it. A chown that changes nothing succeeds without asking the owner; one that changes an ID
// is checked as the local kernel checks it (by the kernel itself on a mount with allow_other
// and default_permissions; here otherwise) and then applied by the owner, which refuses it
// (EPERM) unless the share is privileged and its own system lets the daemon do it.

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/peerfs/peerfs/internal/wire"
)

// shownIDs are the IDs the kernel is shown for the owner's uid and gid.
func (r *Root) shownIDs(uid, gid uint32) (uint32, uint32) {
	if r.opts.MapIDs {
		if uid == r.opts.OwnerUID {
			uid = r.opts.UID
		}
		if gid == r.opts.OwnerGID {
			gid = r.opts.GID
		}
	}
	return uid, gid
}

// ownerIDs are the owner's uid and gid for IDs the kernel was shown.
func (r *Root) ownerIDs(uid, gid uint32) (uint32, uint32) {
	if r.opts.MapIDs {
		if uid == r.opts.UID {
			uid = r.opts.OwnerUID
		}
		if gid == r.opts.GID {
			gid = r.opts.OwnerGID
		}
	}
	return uid, gid
}

// chownReq adds to req the owner and group changes that in asks for, if any changes an ID of
// the file (described by the owner as cur), once the caller may make them.
func (n *Node) chownReq(ctx context.Context, in *fuse.SetAttrIn, req *wire.SetAttrReq) syscall.Errno {
	uid, setUID := in.GetUID()
	gid, setGID := in.GetGID()
	if !setUID && !setGID {
		return 0
	}
	cur, err := n.entry(ctx)
	if err != nil {
		return toErrno(err)
	}
	shownUID, shownGID := n.root.shownIDs(cur.UID, cur.GID)
	ownerUID, ownerGID := n.root.ownerIDs(uid, gid)
	newUID := setUID && uid != shownUID
	newGID := setGID && gid != shownGID
	if !newUID && !newGID {
		return 0 // chown to the current IDs: nothing to ask the owner
	}
	// With default_permissions the kernel checked the caller already (setattr_prepare).
	if !n.root.opts.AllowOther && !mayChown(ctx, shownUID, newUID, gid, newGID) {
		return syscall.EPERM
	}
	if newUID {
		req.Valid |= wire.SetUID
		req.UID = ownerUID
	}
	if newGID {
		req.Valid |= wire.SetGID
		req.GID = ownerGID
	}
	return 0
}

// mayChown reports whether the caller may give a file shown as owned by fileUID a new owner
// (newUID) or the group gid (newGID), as the kernel's chown_ok and chgrp_ok decide: with
// CAP_CHOWN anything; without, only the file's owner, only to a group it belongs to, and the
// owner unchanged. The caller's capabilities and groups are read from /proc; where they
// cannot be, uid 0 is taken for CAP_CHOWN and the caller's primary group for its only one.
func mayChown(ctx context.Context, fileUID uint32, newUID bool, gid uint32, newGID bool) bool {
	caller, ok := fuse.FromContext(ctx)
	if !ok {
		return false
	}
	if caps, ok := effectiveCaps(caller.Pid); ok {
		if caps&(1<<capChown) != 0 {
			return true
		}
	} else if caller.Uid == 0 {
		return true
	}
	if newUID || caller.Uid != fileUID {
		return false
	}
	return !newGID || gid == caller.Gid || inGroups(caller.Pid, gid)
}

// capChown is CAP_CHOWN's number (linux/capability.h).
const capChown = 0

// inGroups reports whether process pid has gid among its supplementary groups.
func inGroups(pid, gid uint32) bool {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if list, ok := strings.CutPrefix(line, "Groups:"); ok {
			for _, g := range strings.Fields(list) {
				if g == strconv.FormatUint(uint64(gid), 10) {
					return true
				}
			}
			return false
		}
	}
	return false
}

// foreignCaller reports whether the caller is another user than the one who mounted, on an
// --allow-other mount: what it creates must be given to it (giveToCaller).
func (r *Root) foreignCaller(ctx context.Context) bool {
	if !r.opts.AllowOther {
		return false
	}
	caller, ok := fuse.FromContext(ctx)
	return ok && (caller.Uid != r.opts.UID || caller.Gid != r.opts.GID)
}

// giveToCaller gives a file that directory n just had the owner make at p (described by e,
// updated here) to the caller who asked for it, as a local disk makes it the creator's: the
// owner's daemon made it with its own IDs. The group stays the directory's in a set-group-ID
// directory. Only on an --allow-other mount, for a caller who is not the mounting user, and
// only where the owner allows it (a privileged share, a daemon with CAP_CHOWN); otherwise the
// file stays the daemon's, and the refusal is logged once.
func (n *Node) giveToCaller(ctx context.Context, p string, e *wire.Entry) {
	if !n.root.foreignCaller(ctx) {
		return
	}
	caller, _ := fuse.FromContext(ctx)
	req := wire.SetAttrReq{Path: p, Valid: wire.SetUID | wire.SetGID}
	req.UID, req.GID = n.root.ownerIDs(caller.Uid, caller.Gid)
	if dir, err := n.entry(ctx); err == nil && dir.Mode&syscall.S_ISGID != 0 {
		req.Valid &^= wire.SetGID
	}
	if req.UID == e.UID && (req.Valid&wire.SetGID == 0 || req.GID == e.GID) {
		return
	}
	n.root.changeAsked()
	resp, err := n.root.owner.SetAttr(ctx, req)
	if err != nil {
		n.root.giveOnce.Do(func() {
			n.root.log.Warn("files other users create through the mount stay the owner's daemon's: "+
				"the owner refused to give them away (share add --privileged, and a daemon that may chown)", "path", p, "err", err)
		})
		return
	}
	*e = resp.Entry
}

// boolFlag is flag when on, else 0.
func boolFlag(on bool, flag uint32) uint32 {
	if on {
		return flag
	}
	return 0
}
