package directio

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/peerfs/peerfs/internal/chunkbuf"
)

// alignedBuf returns n bytes starting on an Align boundary, with room to round n up.
func alignedBuf(n int) []byte {
	raw := make([]byte, n+2*Align)
	o := chunkbuf.Start(raw, 0)
	return raw[o : o+n : o+roundUp(n)]
}

func writeRandom(t *testing.T, path string, n int) []byte {
	t.Helper()
	data := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(n), byte(n >> 8), byte(n >> 16)}).Read(data)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

// cachedPages counts the pages of path in the page cache, or -1 without cachestat(2).
func cachedPages(t *testing.T, f *os.File) int {
	var st unix.Cachestat_t
	if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &st, 0); err != nil {
		return -1
	}
	return int(st.Cache)
}

// evict drops path's clean pages from the page cache.
func evict(t *testing.T, f *os.File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// TestReaderSizes reads files of awkward sizes chunk by chunk, cold and warm, aligned and not:
// the bytes always match and the end of the file is io.EOF exactly as os.File.ReadAt says.
func TestReaderSizes(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{1, Align - 1, Align, Align + 1, 3*Align + 100, 1 << 20, 1<<20 + 5} {
		data := writeRandom(t, filepath.Join(dir, "f"), size)
		f, err := os.Open(filepath.Join(dir, "f"))
		if err != nil {
			t.Fatal(err)
		}
		for _, cold := range []bool{true, false} {
			if cold {
				evict(t, f)
			}
			r := NewReader(f)
			const chunk = 8192
			var got []byte
			for off := 0; ; off += chunk {
				buf := alignedBuf(chunk)
				n, err := r.ReadAt(buf, int64(off))
				got = append(got, buf[:n]...)
				if off+chunk >= size {
					if off+chunk > size && !errors.Is(err, io.EOF) {
						t.Fatalf("size %d: read at %d ended with %v, want EOF", size, off, err)
					}
					break
				}
				if err != nil || n != chunk {
					t.Fatalf("size %d: read at %d: %d, %v", size, off, n, err)
				}
			}
			r.Close()
			if !bytes.Equal(got, data) {
				t.Fatalf("size %d cold=%v: the bytes read differ", size, cold)
			}
			// Unaligned offsets and buffers take the page cache and still match.
			buf := make([]byte, 1000)
			if size > 1003 {
				n, err := NewReader(f).ReadAt(buf[3:], 7)
				if err != nil && !errors.Is(err, io.EOF) || !bytes.Equal(buf[3:3+n], data[7:7+n]) {
					t.Fatalf("size %d: unaligned read differs (%d, %v)", size, n, err)
				}
			}
		}
		f.Close()
	}
}

// TestReaderSkipsPageCache: a cold file read through a Reader leaves the page cache empty (it
// was read with O_DIRECT), and a cached one is served from the page cache, dirty pages included.
func TestReaderSkipsPageCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := writeRandom(t, path, 4<<20)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if cachedPages(t, f) < 0 {
		t.Skip("no cachestat(2) on this kernel: the Reader always takes the page cache")
	}
	evict(t, f)
	if n := cachedPages(t, f); n != 0 {
		t.Skipf("%d pages stay cached after FADV_DONTNEED on this filesystem", n)
	}
	r := NewReader(f)
	defer r.Close()
	if r.directFile() == nil {
		t.Skip("this filesystem refuses O_DIRECT")
	}
	buf := alignedBuf(1 << 20)
	for off := 0; off < len(data); off += len(buf) {
		if _, err := r.ReadAt(buf, int64(off)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, data[off:off+len(buf)]) {
			t.Fatalf("chunk at %d differs", off)
		}
	}
	if n := cachedPages(t, f); n != 0 {
		t.Fatalf("%d pages entered the page cache during a cold read", n)
	}
	// A buffered write not yet on the disk must be seen.
	if _, err := f.WriteAt([]byte("fresh"), 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAt(buf, 1<<20); err != nil || string(buf[:5]) != "fresh" {
		t.Fatalf("a read after a buffered write sees %q (%v)", buf[:5], err)
	}
}

// TestWriter writes aligned and unaligned pieces, from aligned and unaligned memory: the file
// holds exactly them, and large aligned writes to an uncached file left the page cache empty.
func TestWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(f)
	want := make([]byte, 0, 4<<20)
	rng := rand.NewChaCha8([32]byte{2, 3})
	for i, n := range []int{1 << 20, 1 << 20, 1<<20 + 3*Align, Align, 12345} {
		buf := alignedBuf(n)
		if i == 1 {
			buf = make([]byte, n+1)[1:] // not aligned in memory: copied to an aligned buffer
		}
		rng.Read(buf)
		if _, err := w.WriteAt(buf, int64(len(want))); err != nil {
			t.Fatal(err)
		}
		want = append(want, buf...)
		if i == 2 && w.direct != nil && cachedPages(t, f) == 0 {
			t.Logf("3 MiB written with O_DIRECT, none of it in the page cache")
		} else if i == 2 && w.direct != nil {
			t.Errorf("%d pages of the direct writes are in the page cache", cachedPages(t, f))
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the file differs from what was written (%d bytes, %v)", len(got), err)
	}
}

// TestWriterKeepsCachedFilesCoherent: a file whose pages are cached (another program reads
// or maps it) is written through the page cache, and a mapping sees the new bytes at once.
func TestWriterKeepsCachedFilesCoherent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeRandom(t, path, 1<<20)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 1<<20, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	_ = m[0] // fault a page in
	buf := alignedBuf(1 << 20)
	for i := range buf {
		buf[i] = 0xA5
	}
	w := NewWriter(f)
	defer w.Close()
	if _, err := w.WriteAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if w.direct != nil && cachedPages(t, f) >= 0 {
		t.Error("a file with cached pages was written with O_DIRECT")
	}
	if m[0] != 0xA5 || m[1<<20-1] != 0xA5 {
		t.Fatal("the mapping does not see the write")
	}
}
