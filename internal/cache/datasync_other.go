//go:build !linux

package cache

import "os"

// datasync flushes f's data; without fdatasync, a full fsync.
func datasync(f *os.File) error { return f.Sync() }
