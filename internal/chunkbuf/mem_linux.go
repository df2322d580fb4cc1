package chunkbuf

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

const hugePage = 2 << 20

// mapRegion maps n bytes of private memory starting on a huge-page boundary and asks the
// kernel to back it with transparent huge pages (honoured where THP is "always" or
// "madvise"; elsewhere the memory is ordinary pages). nil when the mapping fails.
func mapRegion(n int) []byte {
	m, err := unix.Mmap(-1, 0, n+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	o := int((hugePage - uintptr(unsafe.Pointer(unsafe.SliceData(m)))%hugePage) % hugePage)
	mem := m[o : o+n : o+n]
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE) // a kernel without THP refuses: ordinary pages
	return mem
}

// releaseRegion gives a region's memory back to the kernel; the next touch maps it anew.
func releaseRegion(mem []byte) {
	_ = unix.Madvise(mem, unix.MADV_DONTNEED)
}

// offsetIn returns p's offset in mem, or -1 when p is not in it.
func offsetIn(mem []byte, p *byte) int {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	addr := uintptr(unsafe.Pointer(p))
	if addr < base || addr >= base+uintptr(len(mem)) {
		return -1
	}
	return int(addr - base)
}
