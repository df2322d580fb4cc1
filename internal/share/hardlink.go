package share

import (
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/peerfs/peerfs/internal/rootfs"
)

// Hard links. os.Root judges names, and a hard link is a second name for the same file that
// shows nothing of where the other names are: a link inside the share to a file outside it
// (made by anyone who can write the folder, or by the owner without thinking of it) would let
// peers read and write that file, root's files too if the daemon runs as root. Which names a
// file has cannot be found cheaply (only by walking every file system it could be on), so the
// rule is:
//
//   - a regular file with one link is served;
//   - a regular file with more than one is served only if the share allows hard links
//     (peerfs share add --allow-hardlinks) or if the link was made through the share (LINK,
//     from a peer's mount: git and other programs make links that must keep working). Such a
//     file carries the extended attribute user.peerfs.link, which peers can neither see nor
//     set; where the file system takes no user attributes, the share remembers the file's
//     device and inode until it closes.
//
// Anything else is refused with EACCES, for reading, writing and attribute changes alike, and
// the owner's log says once per file how to allow it.

// linkMark is the attribute Link sets on the files it links; reservedXattrs is the namespace
// peers may not touch, so the mark cannot be forged through the share.
const (
	linkMark       = "user.peerfs.link"
	reservedXattrs = "user.peerfs."
)

func isReservedXattr(name string) bool { return strings.HasPrefix(name, reservedXattrs) }

// ErrHardlink is matched (errors.Is) by the refusal of a file with other hard links.
var ErrHardlink = hardlinkError{}

// hardlinkError refuses a file with other hard links; its text is fit for a peer.
type hardlinkError struct{}

func (hardlinkError) Error() string {
	return "refused: the file has other hard links, which may lead outside the share; its owner may allow them (peerfs share add --allow-hardlinks)"
}

func (hardlinkError) Unwrap() error { return syscall.EACCES }

// linkState is what a share knows of hard links made through it.
type linkState struct {
	allow  bool // the share serves files with several links whatever made them
	mu     sync.Mutex
	linked map[fileID]struct{} // made here where no mark could be set; guarded by mu
	logged map[fileID]struct{} // refusals already logged; guarded by mu
}

type fileID struct{ dev, ino uint64 }

// checkLinks refuses the regular file f, of path, that fi describes if it has several hard
// links that the share does not allow (see above). f may be nil: the file is then opened
// through os.Root, by name, to read its mark.
func (s *Share) checkLinks(op, path string, f *os.File, fi fs.FileInfo) error {
	if s.links.allow || !fi.Mode().IsRegular() || linkCount(fi) <= 1 {
		return nil
	}
	id := idOf(fi)
	s.links.mu.Lock()
	_, made := s.links.linked[id]
	s.links.mu.Unlock()
	if made {
		return nil
	}
	if f == nil {
		var err error
		f, err = s.root.OpenFile(rootName(path), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|rootfs.ONoFollow, 0)
		if err == nil {
			defer f.Close()
			if cur, err := f.Stat(); err != nil || idOf(cur) != id {
				f = nil // replaced since: judge nothing by it
			}
		}
	}
	if f != nil {
		if _, err := getXattr(f, linkMark); err == nil {
			return nil
		}
	}
	s.links.mu.Lock()
	_, logged := s.links.logged[id]
	if !logged {
		if s.links.logged == nil {
			s.links.logged = map[fileID]struct{}{}
		}
		s.links.logged[id] = struct{}{}
	}
	s.links.mu.Unlock()
	if !logged {
		slog.Warn("refused to serve a file with other hard links, which may lie outside the share; "+
			"if that is intended, remove the share and add it again with --allow-hardlinks",
			"share", s.name, "path", path, "links", linkCount(fi))
	}
	return fail(op, path, ErrHardlink)
}

// markLinked records that the file at path (valid) was linked through the share, so that
// checkLinks serves it: the mark attribute where the file system takes it, else in memory.
func (s *Share) markLinked(path string) {
	f, err := s.root.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|rootfs.ONoFollow, 0)
	if err != nil {
		return // a symlink (links to links need no mark) or gone
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	if setXattr(f, linkMark, []byte{'1'}, 0) == nil {
		return
	}
	s.links.mu.Lock()
	if s.links.linked == nil {
		s.links.linked = map[fileID]struct{}{}
	}
	s.links.linked[idOf(fi)] = struct{}{}
	s.links.mu.Unlock()
}
