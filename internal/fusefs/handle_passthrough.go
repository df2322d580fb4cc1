package fusefs

// Writers of a file read by passthrough.
//
// The kernel fails every open of an inode that is open by FUSE passthrough unless that open is
// passthrough too, with the same backing file (fs/fuse/iomode.c): a page-cached or direct-I/O
// writer cannot join passthrough readers. Refusing the writer (ETXTBSY) is no answer POSIX
// allows, and waiting for the readers can wait forever (a program holding its own reader).
// So the writer joins them: it is opened by passthrough on the same backing file, the file's
// fully cached copy in the chunk cache (opened read-write), and the kernel writes into it.
// Readers and writers then share one file, so every reader sees every write at once, as on a
// local disk. The daemon sees none of those writes: each flush of such a writer (close, fsync,
// release) compares the backing file with its state when the owner last got it whole
// (fileStamp: size and mtime) and, if it changed, sends it whole through the write-back
// path, one WRITE per piece, so close-to-open holds. A truncate reaches the backing file too.
// Costly for a large file written through many short opens, but only while it is also read by
// passthrough; an open for writing first waits passDrainWait for passthrough readers to go.

import (
	"context"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/peerfs/peerfs/internal/wire"
)

// fileStamp is what fstat says of a backing file: a write changes it.
type fileStamp struct {
	size, mtimeNs int64
}

// stampOf returns f's stamp.
func stampOf(f *os.File) (fileStamp, error) {
	fi, err := f.Stat()
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{size: fi.Size(), mtimeNs: fi.ModTime().UnixNano()}, nil
}

// coarseTime is the longest a file system may leave a backing file's times unchanged across
// writes (a jiffy of 250 Hz is 4 ms): a stamp that recent is taken for changed.
const coarseTime = 10 * time.Millisecond

// joinPassthrough opens h by passthrough on the backing file when the file is open by
// passthrough already, as the kernel requires; ok false means it is not.
func (n *Node) joinPassthrough(h *Handle, e *wire.Entry) (fs.FileHandle, bool) {
	f := n.fileOf()
	n.mu.Lock()
	defer n.mu.Unlock()
	if f.passOpens == 0 || f.passCF == nil {
		return nil, false
	}
	f.passOpens++
	h.pass = true // opens counts it already (reserveOpen)
	if h.writable {
		h.passWrite = true
		f.writers++
		f.passWriters++
		if f.localSize < 0 {
			f.localSize = int64(e.Size)
		}
	}
	h.cf = f.passCF.Retain()
	n.root.stats.passthrough.Add(1)
	return &passHandle{Handle: h, fd: int(h.cf.OSFile().Fd())}, true
}

// sendPassWrites sends the backing file whole to the owner if a passthrough writer changed it
// since the owner last got it. If that fails, the cache forgets the file: its copy no longer
// holds the version it was cached as, and must not serve an open after these end.
func (n *Node) sendPassWrites(ctx context.Context) (errno syscall.Errno) {
	defer func() {
		if errno != 0 {
			n.root.forgetContent(n.path())
		}
	}()
	f := n.fileOf()
	n.mu.Lock()
	cf := f.passCF
	if cf != nil {
		cf = cf.Retain()
	}
	sent := f.passSent
	n.mu.Unlock()
	if cf == nil {
		return 0
	}
	defer cf.Release()
	of := cf.OSFile()
	now, err := stampOf(of)
	if err != nil {
		return n.failed("send passthrough writes", err)
	}
	if now == sent && time.Since(time.Unix(0, now.mtimeNs)) > coarseTime {
		return 0
	}
	buf := make([]byte, n.root.opts.Piece)
	for off := int64(0); off < now.size; {
		k, err := of.ReadAt(buf[:min(int64(len(buf)), now.size-off)], off)
		if k > 0 {
			f.wb.Write(buf[:k], off)
			off += int64(k)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return n.failed("send passthrough writes", err)
		}
		if f.wb.Dirty() >= dirtyLimit {
			if errno := n.flush(ctx); errno != 0 {
				return errno
			}
		}
	}
	n.mu.Lock()
	f.localSize = max(f.localSize, now.size)
	n.mu.Unlock()
	if errno := n.flush(ctx); errno != 0 {
		return errno
	}
	n.mu.Lock()
	f.passSent = now
	n.mu.Unlock()
	return 0
}

// passSize makes the size shown while passthrough writers are open the backing file's: the
// kernel extends the file there without telling the daemon.
func (n *Node) passSize() {
	f := n.file.Load()
	if f == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if f.passWriters == 0 || f.passCF == nil {
		return
	}
	if st, err := stampOf(f.passCF.OSFile()); err == nil {
		f.localSize = st.size
	}
}

// truncatePass cuts the backing file to size while the file is open by passthrough, so its
// readers see the truncate the owner just applied.
func (n *Node) truncatePass(size int64) {
	f := n.file.Load()
	if f == nil {
		return
	}
	n.mu.Lock()
	cf := f.passCF
	if cf != nil {
		cf = cf.Retain()
	}
	n.mu.Unlock()
	if cf == nil {
		return
	}
	defer cf.Release()
	if err := cf.OSFile().Truncate(size); err != nil {
		n.root.log.Warn("passthrough readers of a truncated file may see its old length", "path", n.path(), "err", err)
	}
}
