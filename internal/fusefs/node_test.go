package fusefs

import (
	"testing"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/peerfs/peerfs/internal/cache"
	"github.com/peerfs/peerfs/internal/wire"
)

// A listing makes a Node for every entry the kernel looks up, so a folder of a million files
// holds a million of them: what only an opened or written file needs stays out of Node.
func TestNodeStaysSmall(t *testing.T) {
	const limit = 256 // fs.Inode is 128 of them
	if got := unsafe.Sizeof(Node{}); got > limit {
		t.Errorf("Node is %d bytes, want at most %d (fs.Inode: %d)", got, limit, unsafe.Sizeof(fs.Inode{}))
	}
}

// The answers a never-opened node gives about its file state come without allocating one.
func TestNeverOpenedNodeHasNoFileState(t *testing.T) {
	r := New(Options{})
	n := &Node{root: r}
	e := wire.Entry{Name: "f", Mode: wire.ModeRegular | 0o644, Size: 3, Nlink: 2, Ino: 7}
	n.fill(&e, new(fuse.Attr))
	v := cache.Version{Size: 3, Ino: 7}
	if n.pagesHold(v) || n.isEcho(&e) || n.eventDuringFlush(wire.Event{Path: "f", Entry: e}) {
		t.Error("a node never opened claims pages, echoes or a flush")
	}
	n.passSize()
	n.truncatePass(0)
	if errno := n.flush(t.Context()); errno != 0 {
		t.Errorf("flush of a node never opened: %v", errno)
	}
	if n.links("f") != 2 {
		t.Errorf("links = %d, want the 2 fill showed", n.links("f"))
	}
	if n.file.Load() != nil {
		t.Error("a node never opened got a fileState")
	}
	// The first open makes it.
	if errno := n.reserveOpen(); errno != 0 || n.file.Load() == nil {
		t.Errorf("reserveOpen: %v, fileState %v", errno, n.file.Load())
	}
}

// A file's history of versions and echoes takes memory only once it is written.
func TestRecentAllocatesAtFirstAdd(t *testing.T) {
	var r recent[int]
	if r.has(0) || r.v != nil {
		t.Fatal("empty history has a value or slots")
	}
	for i := range ownVersions + 1 {
		r.add(i + 1)
	}
	if r.has(1) || !r.has(2) || !r.has(ownVersions+1) {
		t.Errorf("history after %d adds: %v", ownVersions+1, r.v)
	}
}
