package directio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/peerfs/peerfs/internal/chunkbuf"
)

// Reader reads a file that is being streamed from start to end.
type Reader struct {
	f *os.File

	once     sync.Once
	direct   *os.File // f reopened with O_DIRECT; nil when the filesystem refuses it
	noDirect bool     // a direct read failed with EINVAL
}

// NewReader returns a Reader of f, which stays the caller's to close after Close.
func NewReader(f *os.File) *Reader { return &Reader{f: f} }

// ReadAt fills p from off as os.File.ReadAt does (io.EOF when the file ends first). A range
// of which the page cache holds nothing is read from the disk with O_DIRECT when off and p
// are aligned (cap(p) must leave room to round len(p) up to Align); anything else, a range
// that is cached even in part, dirty pages included, goes through the page cache.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if len(p) > 0 && off%Align == 0 && chunkbuf.Aligned(p) && cap(p) >= roundUp(len(p)) && !r.noDirect && uncached(r.f, off, len(p)) {
		if d := r.directFile(); d != nil {
			n, err := readFull(d, p[:roundUp(len(p))], off)
			if err == nil || errors.Is(err, io.EOF) {
				if n >= len(p) {
					return len(p), nil
				}
				return n, io.EOF
			}
			if !errors.Is(err, unix.EINVAL) {
				return n, err
			}
			// EINVAL: this file refuses O_DIRECT after all; the page cache serves it.
			r.noDirect = true
		}
	}
	return r.f.ReadAt(p, off)
}

// uncached reports whether the page cache holds none of [off, off+n) of f. cachestat(2)
// (Linux 6.5) looks without side effects; where it is missing, the answer is no.
func uncached(f *os.File, off int64, n int) bool {
	if noCachestat.Load() {
		return false
	}
	var st unix.Cachestat_t
	err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{Off: uint64(off), Len: uint64(n)}, &st, 0)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) {
			noCachestat.Store(true)
		}
		return false
	}
	return st.Cache == 0
}

var noCachestat atomic.Bool

// Close closes the O_DIRECT descriptor, if one was opened.
func (r *Reader) Close() error {
	if r.direct != nil {
		return r.direct.Close()
	}
	return nil
}

func (r *Reader) directFile() *os.File {
	r.once.Do(func() { r.direct = reopenDirect(r.f, unix.O_RDONLY) })
	return r.direct
}

// readFull reads until p is full or the file ends.
func readFull(f *os.File, p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Pread(int(f.Fd()), p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
		if m%Align != 0 {
			return n, io.EOF // a direct read stops short only at the end of the file
		}
	}
	return n, nil
}

// reopenDirect opens f's file again, through its descriptor (so no path is resolved), with
// O_DIRECT and flag. It returns nil where O_DIRECT is refused (tmpfs before Linux 6.6,
// many FUSE filesystems).
func reopenDirect(f *os.File, flag int) *os.File {
	d, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), flag|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return d
}

// Writer writes bulk data: a received download, a large write through a mount. A range of
// which the page cache holds nothing, at an aligned offset and length of at least minDirect
// bytes, goes straight to the disk (through an aligned copy if p itself is not aligned);
// anything else through the page cache, so that programs that have the file open or mapped
// keep the coherence they expect.
type Writer struct {
	f *os.File

	once     sync.Once
	direct   *os.File
	noDirect bool // a direct write failed with EINVAL
}

// minDirect is the smallest write sent straight to the disk: below it the page cache's copy
// costs less than waiting for the device.
const minDirect = 64 << 10

// NewWriter returns a Writer of f, which must be open for writing and stays the caller's.
func NewWriter(f *os.File) *Writer { return &Writer{f: f} }

// WriteAt writes p at off as os.File.WriteAt does.
func (w *Writer) WriteAt(p []byte, off int64) (int, error) {
	if len(p) >= minDirect && aligned(off, len(p)) && !w.noDirect && uncached(w.f, off, len(p)) {
		w.once.Do(func() { w.direct = reopenDirect(w.f, unix.O_WRONLY) })
		if w.direct != nil {
			n, err := writeDirect(w.direct, p, off)
			if err == nil || n > 0 || !errors.Is(err, unix.EINVAL) {
				return n, err
			}
			w.noDirect = true // EINVAL: this file refuses O_DIRECT after all
		}
	}
	return w.f.WriteAt(p, off)
}

// writeDirect writes p (aligned length) at off (aligned) to d, opened with O_DIRECT.
func writeDirect(d *os.File, p []byte, off int64) (int, error) {
	if chunkbuf.Aligned(p) {
		return d.WriteAt(p, off)
	}
	// Unaligned memory goes through an aligned chunk buffer (chunkbuf), a MiB at a time.
	bb := chunkbuf.Get()
	defer chunkbuf.Put(bb)
	bb = bb[:1<<20]
	n := 0
	for n < len(p) {
		k := copy(bb, p[n:])
		m, err := d.WriteAt(bb[:k], off+int64(n))
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Close closes the O_DIRECT descriptor, if one was opened.
func (w *Writer) Close() error {
	if w.direct != nil {
		return w.direct.Close()
	}
	return nil
}
