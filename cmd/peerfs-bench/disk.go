package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/peerfs/peerfs/internal/chunkbuf"
	"github.com/peerfs/peerfs/internal/directio"
	"github.com/peerfs/peerfs/internal/prealloc"
)

// The disk's own ceilings, measured in the same run as the paths that move files through it.
// On loopback both peers share one disk, and a pull or a cold read through a mount cannot go
// faster than this disk takes or gives data along the path peerfs uses: reads of uncached
// ranges and writes of received files go around the page cache (internal/directio), so these
// references go the same way, through the same package, with the same 1 MiB pieces.

// diskChunk is the piece size of both references: a DATA frame's payload, as a pull writes
// and a GET or STREAM reads.
const diskChunk = 1 << 20

// chunkBuf returns a buffer of diskChunk bytes from the memory the owner and a puller move
// file data in (chunkbuf.Get: huge pages where the kernel has them, which O_DIRECT
// transfers take several times faster than heap memory on these machines). Give it back
// with chunkbuf.Put.
func chunkBuf() []byte { return chunkbuf.Get()[:diskChunk] }

// diskWriteOnce writes size bytes to a new file dst as a pull writes a received file: blocks
// reserved first (prealloc), then 1 MiB aligned writes through directio.Writer, which sends
// them straight to the disk. The file is removed afterwards; CPU is this process's.
func diskWriteOnce(dst string, size int64) (sample, error) {
	defer os.Remove(dst)
	buf := chunkBuf()
	defer chunkbuf.Put(buf)
	rand.NewChaCha8([32]byte{3}).Read(buf)
	cpu0, t0 := cpuSelf(), time.Now()
	f, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return sample{}, err
	}
	defer f.Close()
	if err := prealloc.Reserve(f, 0, size); err != nil {
		return sample{}, err
	}
	w := directio.NewWriter(f)
	for off := int64(0); off < size; off += diskChunk {
		if _, err := w.WriteAt(buf[:min(diskChunk, size-off)], off); err != nil {
			w.Close()
			return sample{}, err
		}
	}
	if err := w.Close(); err != nil {
		return sample{}, err
	}
	if err := f.Close(); err != nil {
		return sample{}, err
	}
	return sample{Seconds: time.Since(t0).Seconds(), CPUSeconds: cpuSelf() - cpu0}, nil
}

// warmFile reads file through the page cache, untimed, so that the next reader finds it
// there: on loopback the owner's disk is also the puller's, and a pull of an uncached file
// would have one disk serve both the owner's reads and the puller's writes, which two
// devices never share.
func warmFile(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}

// diskReadOnce reads file from the disk as the owner reads a file it streams: its page cache
// dropped first (as before a cold read through the mount), then 1 MiB aligned reads through
// directio.Reader. note is dropFileCache's, when the file could not be evicted.
func diskReadOnce(file string, size int64) (s sample, note string, err error) {
	if note, err = dropFileCache(file); err != nil {
		return sample{}, "", err
	}
	f, err := os.Open(file)
	if err != nil {
		return sample{}, note, err
	}
	defer f.Close()
	buf := chunkBuf()
	defer chunkbuf.Put(buf)
	cpu0, t0 := cpuSelf(), time.Now()
	r := directio.NewReader(f)
	defer r.Close()
	var n int64
	for n < size {
		m, err := r.ReadAt(buf[:min(diskChunk, size-n)], n)
		n += int64(m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sample{}, note, err
		}
	}
	if n != size {
		return sample{}, note, fmt.Errorf("read %d bytes of %s, want %d", n, file, size)
	}
	return sample{Seconds: time.Since(t0).Seconds(), CPUSeconds: cpuSelf() - cpu0}, note, nil
}
