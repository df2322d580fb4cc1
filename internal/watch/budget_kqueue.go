//go:build (darwin || dragonfly || freebsd || netbsd || openbsd) && !fsnotifytest

package watch

import "github.com/fsnotify/fsnotify"

// kqueue watches open files: fsnotify holds a descriptor for each watched directory and for
// each entry in it. Go raises the soft RLIMIT_NOFILE to the hard limit at start, which macOS
// caps at kern.maxfilesperproc (10240 by default); a hub keeps to a fifth of that, leaving
// room for the daemon's connections, open files and other shares. Past it, directories are
// polled (watch_fsnotify.go). The count is taken when a directory is placed; files created
// in it later take descriptors too, and should the system refuse one, fsnotify reports it and
// the hub carries on.
const (
	defaultBudget = 2048
	entryCost     = 1
)

// addWatch adds one directory's watch.
func addWatch(fw *fsnotify.Watcher, path string) error { return fw.Add(path) }
