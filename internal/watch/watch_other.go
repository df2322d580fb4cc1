//go:build !linux

package watch

import "errors"

// errUnsupported: change events need inotify; elsewhere a mount falls back to its attribute
// timeouts.
var errUnsupported = errors.New("change events are supported on Linux only")

type watcher struct{}

func newWatcher(*Hub) (*watcher, error) { return nil, errUnsupported }

func (w *watcher) walkAll() {}
func (w *watcher) close()   {}
func (h *Hub) watchLoop()   { h.loops.Done() }
