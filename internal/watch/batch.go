package watch

import (
	"strings"

	"github.com/peerfs/peerfs/internal/wire"
)

// batch gathers the paths changed during one window. It records only which paths changed, not
// how: when the batch is taken, each path is looked up again, so a path created and removed
// within the window is reported removed, and one rewritten ten times is reported once with its
// final attributes. Memory is bounded by max paths; past it the batch is one rescan of the root.
type batch struct {
	dirLimit int // children of one directory listed one by one; past it: a rescan of it
	max      int // paths tracked; past it: a rescan of the root

	items  []item         // in order of first occurrence, including dropped ones
	index  map[string]int // live EventChanged items by path
	kids   map[string]int // directory -> children noted in this batch
	rescan map[string]bool
	all    bool // the whole share is to be rescanned
}

// item is one noted path: kind is EventChanged (looked up when taken), EventRescan, or 0 once
// it has been absorbed by a rescan of an ancestor.
type item struct {
	path string
	kind uint8
}

func (b *batch) init(dirLimit, max int) {
	b.dirLimit, b.max = dirLimit, max
	b.index = make(map[string]int)
	b.kids = make(map[string]int)
	b.rescan = make(map[string]bool)
}

// empty reports whether nothing was noted since the last take.
func (b *batch) empty() bool { return !b.all && len(b.items) == 0 }

// note records that path changed.
func (b *batch) note(path string) {
	if b.all {
		return
	}
	if len(b.rescan) > 0 && b.covered(path) {
		return
	}
	if _, ok := b.index[path]; ok {
		return
	}
	if path != "" {
		dir := parentDir(path)
		b.kids[dir]++
		if b.kids[dir] > b.dirLimit {
			b.collapse(dir)
			return
		}
	}
	if len(b.items) >= b.max {
		b.rescanAll()
		return
	}
	b.index[path] = len(b.items)
	b.items = append(b.items, item{path, wire.EventChanged})
}

// covered reports whether an ancestor of path is already to be rescanned.
func (b *batch) covered(path string) bool {
	for path != "" {
		path = parentDir(path)
		if b.rescan[path] {
			return true
		}
	}
	return false
}

// collapse replaces everything noted below dir by one rescan of dir, placed where the first
// of them was. A change of dir itself stays: its new attributes are still worth sending.
func (b *batch) collapse(dir string) {
	if dir == "" {
		b.rescanAll()
		return
	}
	b.rescan[dir] = true
	prefix := dir + "/"
	pos := -1
	for i := range b.items {
		it := &b.items[i]
		if it.kind != 0 && strings.HasPrefix(it.path, prefix) {
			if pos < 0 {
				pos = i
			}
			if it.kind == wire.EventChanged {
				delete(b.index, it.path)
			}
			it.kind = 0
		}
	}
	if pos < 0 {
		pos = len(b.items)
		b.items = append(b.items, item{})
	}
	b.items[pos] = item{dir, wire.EventRescan}
}

// rescanAll turns the batch into one rescan of the root (a kernel queue overflow, a burst
// beyond max paths).
func (b *batch) rescanAll() {
	b.all = true
	b.items = nil
	clear(b.index)
	clear(b.kids)
	clear(b.rescan)
}

// take returns the batch's events and starts a new batch. lookup turns a changed path into its
// event (EventChanged with the entry, or EventRemoved); false leaves the path out.
func (b *batch) take(lookup func(path string) (wire.Event, bool)) []wire.Event {
	var out []wire.Event
	if b.all {
		out = []wire.Event{{Kind: wire.EventRescan}}
	} else {
		out = make([]wire.Event, 0, len(b.items))
		for _, it := range b.items {
			switch it.kind {
			case wire.EventRescan:
				out = append(out, wire.Event{Kind: wire.EventRescan, Path: it.path})
			case wire.EventChanged:
				if ev, ok := lookup(it.path); ok {
					out = append(out, ev)
				}
			}
		}
	}
	b.all = false
	b.items = b.items[:0]
	clear(b.index)
	clear(b.kids)
	clear(b.rescan)
	return out
}

// parentDir returns the share-relative directory holding path ("" for the root's children).
func parentDir(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i]
	}
	return ""
}
