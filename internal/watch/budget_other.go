//go:build fsnotifytest || !(darwin || dragonfly || freebsd || netbsd || openbsd || windows || linux)

package watch

import "github.com/fsnotify/fsnotify"

// Elsewhere (and on Linux under the fsnotifytest tag, where fsnotify uses inotify) a watch
// holds no descriptor: the budget only bounds the tree's bookkeeping.
const (
	defaultBudget = 1 << 20
	entryCost     = 0
)

// addWatch adds one directory's watch.
func addWatch(fw *fsnotify.Watcher, path string) error { return fw.Add(path) }
