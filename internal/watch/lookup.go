package watch

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/peerfs/peerfs/internal/wire"
)

// lookup describes path as it is now: EventChanged with its entry, or EventRemoved. It is
// resolved through os.Root: a symlink is described, never followed out of the share.
func (h *Hub) lookup(path string) (wire.Event, bool) {
	name := path
	if name == "" {
		name = "."
	}
	fi, err := h.root.Lstat(name)
	if gone(err) {
		return wire.Event{Kind: wire.EventRemoved, Path: path}, true
	}
	if err != nil {
		return wire.Event{}, false // unreadable or refused: a peer's STAT would say why
	}
	e := EntryOf(fi)
	if e.IsRegular() && h.Settle != nil {
		release := h.Settle(e.Ino)
		fi, err = h.root.Lstat(name)
		release()
		if gone(err) {
			return wire.Event{Kind: wire.EventRemoved, Path: path}, true
		}
		if err != nil {
			return wire.Event{}, false
		}
		e = EntryOf(fi)
	}
	if e.IsSymlink() {
		target, err := h.root.Readlink(name)
		if gone(err) {
			return wire.Event{Kind: wire.EventRemoved, Path: path}, true
		}
		if err != nil {
			return wire.Event{}, false
		}
		e.Target = target
	}
	return wire.Event{Kind: wire.EventChanged, Path: path, Entry: e}, true
}

// gone reports whether err says the path no longer exists (a component became a file: ENOTDIR).
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
