//go:build !windows

package wal

import "os"

// syncDir flushes dir's entries (a created segment, a renamed mark) to stable storage.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
