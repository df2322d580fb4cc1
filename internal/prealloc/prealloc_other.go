//go:build !linux

package prealloc

import "os"

// Reserve does nothing where fallocate is missing: nothing is reserved ahead, and a full disk
// shows when a write fails.
func Reserve(f *os.File, off, n int64) error { return nil }

// Release has nothing to give back where Reserve reserved nothing.
func Release(f *os.File, end int64) error { return nil }
