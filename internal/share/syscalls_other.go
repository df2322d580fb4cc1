//go:build !linux

package share

import (
	"errors"
	"os"
	"syscall"

	"github.com/peerfs/peerfs/internal/wire"
)

// Off Linux a share serves the mount's portable operations only: plain renames, but no rename
// flags (EINVAL, as renameat2 answers where a filesystem lacks them), no statfs (ENOSYS), no
// extended attributes and no fallocate (EOPNOTSUPP).

const fallocKnown = 0

func statfs(d *os.File) (wire.Statfs, error) { return wire.Statfs{}, syscall.ENOSYS }

func getXattr(f *os.File, name string) ([]byte, error) { return nil, syscall.EOPNOTSUPP }

func listXattr(f *os.File) ([]string, error) { return nil, nil }

func setXattr(f *os.File, name string, value []byte, flags uint32) error { return syscall.EOPNOTSUPP }

func removeXattr(f *os.File, name string) error { return syscall.EOPNOTSUPP }

func fallocate(f *os.File, mode uint32, off, length int64) error { return syscall.EOPNOTSUPP }

func fdatasync(f *os.File) error { return f.Sync() }

// mknodAt is refused off Linux: device numbers travel in Linux's encoding, and FIFOs and
// sockets made through a mount are rare enough to wait for a port of their own.
func mknodAt(dirFd int, name string, mode uint32, rdev uint64) error { return syscall.EOPNOTSUPP }

func syncfs(d *os.File) error { return errors.ErrUnsupported }
