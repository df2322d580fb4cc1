package share

import (
	"errors"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/peerfs/peerfs/internal/prealloc"
	"github.com/peerfs/peerfs/internal/rootfs"
)

// Part files of uploads that nobody finishes are removed after PartExpiry without a change: a
// sender that went away for good must not hold the owner's disk forever. A sender that comes
// back within it resumes; after it, it starts again from the first byte.
const (
	// PartExpiry is how long an upload's part file may stay unchanged before the owner removes
	// it. A day lets a laptop that lost its link resume the next morning.
	PartExpiry = 24 * time.Hour
	// partSweepEvery is how often the part files this share knows of are looked at again.
	partSweepEvery = time.Hour
)

// partSweeper finds expired part files: once by walking the whole share when it opens (parts
// left by an earlier run), then every partSweepEvery among the parts it knows of (found by
// that walk or created since), so a large share is walked only once per start.
type partSweeper struct {
	once   sync.Once
	stop   chan struct{}
	walked chan struct{} // closed once the walk at open is over
	done   chan struct{}
	mu     sync.Mutex
	live   map[string]struct{} // os.Root names of parts not yet expired; guarded by mu
}

// startPartSweeper starts s's sweeper; a read-only share takes no uploads and is left as it
// is. closeParts stops the sweeper and waits for it.
func (s *Share) startPartSweeper() {
	s.parts.stop, s.parts.done, s.parts.live = make(chan struct{}), make(chan struct{}), map[string]struct{}{}
	s.parts.walked = make(chan struct{})
	if s.readOnly {
		close(s.parts.walked)
		close(s.parts.done)
		return
	}
	go s.partLoop()
}

func (s *Share) closeParts() {
	s.parts.once.Do(func() { close(s.parts.stop) })
	<-s.parts.done
}

// notePart records a part file an upload created.
func (s *Share) notePart(part string) {
	s.parts.mu.Lock()
	s.parts.live[part] = struct{}{}
	s.parts.mu.Unlock()
}

// forgetPart drops a part file committed or removed.
func (s *Share) forgetPart(part string) {
	s.parts.mu.Lock()
	delete(s.parts.live, part)
	s.parts.mu.Unlock()
}

func (s *Share) partLoop() {
	defer close(s.parts.done)
	s.walkParts(time.Now())
	close(s.parts.walked)
	t := time.NewTicker(partSweepEvery)
	defer t.Stop()
	for {
		select {
		case <-s.parts.stop:
			return
		case now := <-t.C:
			s.sweepKnownParts(now)
		}
	}
}

// sweepKnownParts expires the part files the share knows of that are old at now.
func (s *Share) sweepKnownParts(now time.Time) {
	s.parts.mu.Lock()
	names := make([]string, 0, len(s.parts.live))
	for n := range s.parts.live {
		names = append(names, n)
	}
	s.parts.mu.Unlock()
	for _, n := range names {
		if s.expirePart(n, now) {
			s.forgetPart(n)
		}
	}
}

// walkParts walks the share through os.Root (symlinks are not followed) and expires or records
// every part file in it. It stops early when the share closes. Directories are listed with
// O_NOATIME where the system allows it: a sweep at every start must not move the access time
// of every directory in the share (it made a test of atime-only SetAttr fail when it ran
// between the change and the check).
func (s *Share) walkParts(now time.Time) {
	dirs := []string{"."}
	for len(dirs) > 0 {
		select {
		case <-s.parts.stop:
			return
		default:
		}
		dir := dirs[len(dirs)-1]
		dirs = dirs[:len(dirs)-1]
		ents, err := s.listNoatime(dir)
		if err != nil {
			continue // gone, or not ours to read: nothing of a peer's can be in it
		}
		for _, d := range ents {
			name := path.Join(dir, d.Name())
			switch {
			case d.IsDir():
				dirs = append(dirs, name)
			case rootfs.IsPartName(d.Name()):
				if !s.expirePart(name, now) {
					s.notePart(name)
				}
			}
		}
	}
}

// listNoatime lists the directory dir (share-relative), without updating its access time
// where the system allows it.
func (s *Share) listNoatime(dir string) ([]fs.DirEntry, error) {
	f, err := s.root.OpenFile(dir, os.O_RDONLY|rootfs.ODirectory|oNoatime, 0)
	if err != nil && oNoatime != 0 {
		f, err = s.root.OpenFile(dir, os.O_RDONLY|rootfs.ODirectory, 0) // O_NOATIME needs the file's owner
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// expirePart removes the part file name (an os.Root name) if it is a regular file unchanged for
// PartExpiry, and reports whether it is gone (removed now or earlier). Anything else under the
// name (a link, a directory) is left alone: the sweep removes only what uploads create.
func (s *Share) expirePart(name string, now time.Time) (gone bool) {
	fi, err := s.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return true
	case err != nil || !fi.Mode().IsRegular():
		return false
	case now.Sub(fi.ModTime()) < PartExpiry:
		return false
	}
	if err := s.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	slog.Info("removed an abandoned upload's part file", "share", s.name, "part", name,
		"unchanged_since", fi.ModTime().Format(time.RFC3339), "size", fi.Size())
	return true
}

// ReservePart reserves on the owner's disk the room an upload to path of size bytes still
// needs in its part file f, which already holds offset bytes. It fails with ENOSPC, reserving
// nothing, if that room exceeds the free space unprivileged users may take (prealloc.Reserve);
// the message says how much is needed and how much is free. A fresh part (offset 0) is removed
// then, so a refused upload leaves no trace; a resumable one keeps its bytes. A size no file
// can have is EFBIG. The caller calls ReleasePart if the upload then stops short.
func (s *Share) ReservePart(f *os.File, path string, offset int64, size uint64) error {
	const op = "put"
	err := error(nil)
	if size > math.MaxInt64 {
		err = errnoErr("size beyond the largest file", syscall.EFBIG)
	} else {
		err = prealloc.Reserve(f, 0, int64(size))
	}
	if err == nil {
		return nil
	}
	if offset == 0 {
		f.Truncate(0)
		s.RemovePart(path)
	}
	return fail(op, path, err)
}

// ReleasePart gives back what the part file f of an upload of size bytes holds past the data
// it received: an upload interrupted or refused keeps its bytes for a resumed PUT, not the rest
// of its reservation.
func ReleasePart(f *os.File, size uint64) {
	if size <= math.MaxInt64 {
		prealloc.Release(f, int64(size))
	}
}
