// Package chunkbuf hands out the buffers that whole chunks of file data live in between the
// network and the disk: a 1 MiB DATA frame or WRITE with its frame head, page-aligned so that
// the disk code (directio) reads and writes them with O_DIRECT and rpc receives and sends
// frames in them without a copy. It knows nothing of frames or files.
//
// An O_DIRECT transfer hands the device the buffer's physical pages: the kernel pins each
// one and builds the request from one segment per physically contiguous run. From ordinary
// heap memory that is 256 pages and segments per MiB, which a device may split into several
// requests. So buffers are cut from memory the kernel is asked to back with transparent
// huge pages (2 MiB, physically contiguous): on the virtio disk of the machines BENCHMARKS.md
// describes, 1 MiB O_DIRECT reads ran at 550-780 MiB/s from heap memory at any queue depth
// and at 2.8-3.8 GiB/s from huge pages, and writes at 460 MiB/s against 1.9-2.5 GiB/s.
//
// The arena maps regions of arenaRegion bytes, up to arenaMax in all, as they are needed and
// keeps them; a region none of whose buffers has been in use for arenaTrimAfter gives its
// memory back to the kernel (MADV_DONTNEED, whole huge pages) and is filled again on next use.
// Beyond arenaMax, and where the kernel has no huge pages, buffers come from the heap: slower
// transfers, never wrong ones.
package chunkbuf

import (
	"slices"
	"sync"
	"time"
	"unsafe"
)

// PageSize is the alignment of every buffer: the page size, a multiple of every logical
// block size Linux supports, so O_DIRECT accepts the buffer.
const PageSize = 4096

// Aligned reports whether p starts at a PageSize boundary.
func Aligned(p []byte) bool {
	return len(p) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(p)))%PageSize == 0
}

// Start returns the index o in [0, PageSize) of raw such that raw[o+skip] is at a PageSize
// boundary: a buffer that begins at raw[o] keeps skip bytes of header before aligned data.
func Start(raw []byte, skip int) int {
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(raw))) + uintptr(skip)
	return int((PageSize - addr%PageSize) % PageSize)
}

// Len is the length of a buffer: room for a largest frame (a 1 MiB chunk, its head
// and some slack) and for moving its data onto a page boundary.
const Len = 1<<20 + 128<<10

const (
	arenaRegion    = 8 << 20 // seven buffers
	arenaMax       = 256 << 20
	arenaTrimAfter = 30 * time.Second
)

// arena is the process's chunk memory: regions in the order they were mapped.
type arena struct {
	mu        sync.Mutex
	regions   []*region
	trimAfter time.Duration
	trimTimer *time.Timer // pending trim, nil when none is scheduled
	mapFailed bool        // mapping a region failed once: use the heap from then on
}

type region struct {
	mem     []byte // arenaRegion bytes, starting on a huge-page boundary where the kernel has them
	free    []int  // indexes of free buffers
	used    int
	idle    time.Time // when used last fell to 0
	trimmed bool      // its memory was given back since it was last used
}

var chunks = arena{trimAfter: arenaTrimAfter}

// heapBufs keeps buffers that came from the heap, for reuse without garbage.
var heapBufs = sync.Pool{New: func() any {
	raw := make([]byte, Len+PageSize)
	o := Start(raw, 0)
	b := raw[o : o+Len : o+Len]
	return &b
}}

// Get returns a buffer of Len bytes that starts on a page boundary, from huge pages
// where the kernel gives them. Give it back with Put; its contents are undefined.
func Get() []byte {
	if b := chunks.get(); b != nil {
		return b
	}
	return *heapBufs.Get().(*[]byte)
}

// Put gives back a buffer from Get (whole: the slice Get returned, or any
// reslice of it that starts where it started). The caller must not touch it afterwards.
func Put(b []byte) {
	b = b[:cap(b)]
	if !chunks.put(b) {
		putHeap(b)
	}
}

// putHeap keeps a heap buffer; apart so that only this path moves b to the heap.
func putHeap(b []byte) { heapBufs.Put(&b) }

func (a *arena) get() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.regions {
		if b := r.take(); b != nil {
			return b
		}
	}
	if a.mapFailed || len(a.regions)*arenaRegion >= arenaMax {
		return nil
	}
	mem := mapRegion(arenaRegion)
	if mem == nil {
		a.mapFailed = true
		return nil
	}
	r := &region{mem: mem}
	for i := arenaRegion/Len - 1; i >= 0; i-- {
		r.free = append(r.free, i)
	}
	a.regions = append(a.regions, r)
	return r.take()
}

// take hands out the region's lowest free buffer, or nil.
func (r *region) take() []byte {
	if len(r.free) == 0 {
		return nil
	}
	i := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	r.used++
	r.trimmed = false
	return r.mem[i*Len : (i+1)*Len : (i+1)*Len]
}

// put takes b back if it is one of the arena's buffers.
func (a *arena) put(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	p := &b[0]
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.regions {
		off := offsetIn(r.mem, p)
		if off < 0 {
			continue
		}
		// Keep free buffers sorted high to low, so take hands out the lowest: a region's
		// buffers are used before the next region's, and idle regions stay idle.
		i := off / Len
		j := len(r.free)
		for j > 0 && r.free[j-1] < i {
			j--
		}
		r.free = slices.Insert(r.free, j, i)
		if r.used--; r.used == 0 {
			r.idle = time.Now()
			a.scheduleTrim(a.trimAfter)
		}
		return true
	}
	return false
}

// scheduleTrim makes sure a trim runs within d. Called with a.mu held.
func (a *arena) scheduleTrim(d time.Duration) {
	if a.trimTimer == nil {
		a.trimTimer = time.AfterFunc(d, a.trim)
	}
}

// trim gives back the memory of regions idle for trimAfter, and comes back for those idle
// for less.
func (a *arena) trim() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.trimTimer = nil
	now := time.Now()
	var next time.Duration
	for _, r := range a.regions {
		if r.used > 0 || r.trimmed {
			continue
		}
		if wait := r.idle.Add(a.trimAfter).Sub(now); wait > 0 {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		releaseRegion(r.mem)
		r.trimmed = true
	}
	if next > 0 {
		a.scheduleTrim(next)
	}
}
