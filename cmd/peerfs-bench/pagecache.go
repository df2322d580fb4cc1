package main

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dropFileCache evicts one file's pages from the kernel page cache, so that the next read
// comes from the disk: fdatasync (dirty pages are not evicted), then
// posix_fadvise(POSIX_FADV_DONTNEED), which needs no privilege and leaves the rest of a shared
// machine's cache alone. mincore then says how much is still resident; if more than 1%, and
// only then, it falls back to "echo 1 > /proc/sys/vm/drop_caches", which needs root.
//
// It returns a note when the file could not be evicted; the cold read is then warmer than it
// claims to be, and the report says so.
func dropFileCache(path string) (note string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return "", fmt.Errorf("fdatasync %s: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return "", fmt.Errorf("fadvise %s: %w", path, err)
	}
	res, pages := resident(f, fi.Size())
	if res*100 <= pages {
		return "", nil
	}
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0); err != nil {
		return fmt.Sprintf("page cache not dropped (%d of %d pages of %s still resident; drop_caches: %v)",
			res, pages, path, err), nil
	}
	if res, pages = resident(f, fi.Size()); res*100 > pages {
		return fmt.Sprintf("page cache not dropped (%d of %d pages of %s still resident)", res, pages, path), nil
	}
	return "", nil
}

// resident counts a file's pages in the page cache with mincore over a read-only mapping.
func resident(f *os.File, size int64) (res, pages int64) {
	if size == 0 {
		return 0, 0
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, 0
	}
	defer unix.Munmap(m)
	vec := make([]byte, (size+int64(os.Getpagesize())-1)/int64(os.Getpagesize()))
	// x/sys/unix has no Mincore wrapper on Linux.
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, 0
	}
	for _, v := range vec {
		res += int64(v & 1)
	}
	return res, int64(len(vec))
}
