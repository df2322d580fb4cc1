//go:build !linux

package prealloc

import "os"

// Reserve does nothing where fallocate is missing.
func Reserve(f *os.File, off, n int64) error { return nil }
