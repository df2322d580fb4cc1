package fusefs

import (
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/peerfs/peerfs/internal/stats"
)

// timedFS times the FUSE requests fusefs counts (opStats), around go-fuse's bridge: from the
// request parsed to the reply ready, which is the daemon's share of the latency a program
// sees. Wrapping the bridge times every operation in one place, including the bridge's own
// work, and leaves the operations themselves alone. The cost is two clock reads and three
// atomic adds per request (stats.BenchmarkAddTimed), without allocation; a request through
// the kernel costs tens of microseconds. Operations fusefs does not count pass through
// untimed.
type timedFS struct {
	fuse.RawFileSystem
	s *opStats
}

// since records the time since start as one call of o. Deferred with time.Now() as its
// argument, it times the rest of the function.
func since(o *stats.Op, start time.Time) { o.AddTime(int64(time.Since(start))) }

func (t *timedFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	defer since(t.s.lookup, time.Now())
	return t.RawFileSystem.Lookup(cancel, h, name, out)
}

func (t *timedFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	defer since(t.s.getattr, time.Now())
	return t.RawFileSystem.GetAttr(cancel, in, out)
}

func (t *timedFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	defer since(t.s.setattr, time.Now())
	return t.RawFileSystem.SetAttr(cancel, in, out)
}

func (t *timedFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	defer since(t.s.mkdir, time.Now())
	return t.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (t *timedFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	defer since(t.s.unlink, time.Now())
	return t.RawFileSystem.Unlink(cancel, h, name)
}

func (t *timedFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	defer since(t.s.rmdir, time.Now())
	return t.RawFileSystem.Rmdir(cancel, h, name)
}

func (t *timedFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	defer since(t.s.rename, time.Now())
	return t.RawFileSystem.Rename(cancel, in, oldName, newName)
}

func (t *timedFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	defer since(t.s.link, time.Now())
	return t.RawFileSystem.Link(cancel, in, name, out)
}

func (t *timedFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	defer since(t.s.symlink, time.Now())
	return t.RawFileSystem.Symlink(cancel, h, target, name, out)
}

func (t *timedFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	defer since(t.s.xattr, time.Now())
	return t.RawFileSystem.GetXAttr(cancel, h, attr, dest)
}

func (t *timedFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	defer since(t.s.xattr, time.Now())
	return t.RawFileSystem.ListXAttr(cancel, h, dest)
}

func (t *timedFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	defer since(t.s.xattr, time.Now())
	return t.RawFileSystem.SetXAttr(cancel, in, attr, data)
}

func (t *timedFS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	defer since(t.s.xattr, time.Now())
	return t.RawFileSystem.RemoveXAttr(cancel, h, attr)
}

func (t *timedFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	defer since(t.s.create, time.Now())
	return t.RawFileSystem.Create(cancel, in, name, out)
}

func (t *timedFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	defer since(t.s.open, time.Now())
	return t.RawFileSystem.Open(cancel, in, out)
}

func (t *timedFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	defer since(t.s.read, time.Now())
	return t.RawFileSystem.Read(cancel, in, buf)
}

func (t *timedFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	defer since(t.s.release, time.Now())
	t.RawFileSystem.Release(cancel, in)
}

// Writev is how go-fuse delivers every WRITE; it falls back to Write only when Writev
// answers ENOSYS, which is then not a write to time.
func (t *timedFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	start := time.Now()
	n, st := t.RawFileSystem.Writev(cancel, in, data)
	if st != fuse.ENOSYS {
		since(t.s.write, start)
	}
	return n, st
}

func (t *timedFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	defer since(t.s.write, time.Now())
	return t.RawFileSystem.Write(cancel, in, data)
}

func (t *timedFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	defer since(t.s.flush, time.Now())
	return t.RawFileSystem.Flush(cancel, in)
}

func (t *timedFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	defer since(t.s.fsync, time.Now())
	return t.RawFileSystem.Fsync(cancel, in)
}

func (t *timedFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	defer since(t.s.fsync, time.Now())
	return t.RawFileSystem.FsyncDir(cancel, in)
}

func (t *timedFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	defer since(t.s.readdir, time.Now())
	return t.RawFileSystem.ReadDir(cancel, in, out)
}

func (t *timedFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	defer since(t.s.readdir, time.Now())
	return t.RawFileSystem.ReadDirPlus(cancel, in, out)
}

func (t *timedFS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	defer since(t.s.statfs, time.Now())
	return t.RawFileSystem.StatFs(cancel, h, out)
}
