//go:build !fsnotifytest

package watch

import "github.com/fsnotify/fsnotify"

// ReadDirectoryChangesW watches one directory per handle, and fsnotify gives each watch its
// own buffer for the system to fill. A hub watches at most 4096 directories with 16 KiB
// buffers (64 MiB in all); past that, directories are polled (watch_fsnotify.go). A buffer
// that overflows in a burst becomes a rescan of the share.
const (
	defaultBudget = 4096
	entryCost     = 0
)

// addWatch adds one directory's watch.
func addWatch(fw *fsnotify.Watcher, path string) error {
	return fw.AddWith(path, fsnotify.WithBufferSize(16<<10))
}
