package serve

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/share"
	"github.com/peerfs/peerfs/internal/sharetest"
	"github.com/peerfs/peerfs/internal/wire"
)

// handlerFor serves sh alone, as its owner serves a peer it is exported to.
func handlerFor(sh *share.Share) *Handler {
	return &Handler{
		Lookup: func(name string) (*share.Share, bool) { return sh, name == sh.Name() },
		List:   func() []wire.ShareInfo { return []wire.ShareInfo{{Name: sh.Name()}} },
	}
}

// servePeer serves sh over a real loopback TCP connection and returns the client side, as a
// peer sees the share.
func servePeer(t testing.TB, sh *share.Share) remote.Peer {
	t.Helper()
	return sharetest.Serve(t, handlerFor(sh))
}

// openTree opens a sharetest.Tree as the share "test".
func openTree(t testing.TB, readOnly bool) (sharetest.Tree, *share.Share) {
	t.Helper()
	tr := sharetest.NewTree(t)
	sh, err := share.Open("test", tr.Share, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	return tr, sh
}

// remoteCode returns the wire code of a peer's ERROR in err, or 0.
func remoteCode(err error) wire.Errno {
	var re *wire.RemoteError
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}

// TestReadHugeOffset: a READ at an offset no file can reach (2^63 and above, negative as an
// int64) is invalid, as pread(2) answers EINVAL for a negative offset; it is not an I/O error.
func TestReadHugeOffset(t *testing.T) {
	_, sh := openTree(t, false)
	p := servePeer(t, sh)
	buf := make([]byte, 16)
	for _, off := range []uint64{1 << 63, math.MaxUint64} {
		_, err := p.Read(context.Background(), "test", "a.txt", off, buf)
		if got := remoteCode(err); got != wire.EINVAL {
			t.Errorf("READ at %#x: %v (code %v), want EINVAL", off, err, got)
		}
	}
}

// TestRoutes: every request the protocol defines has a route, and the route says where it
// runs: quick metadata calls and small writes on the read loop, everything that may read,
// write or wait long on a goroutine of its own.
func TestRoutes(t *testing.T) {
	onLoop := map[wire.Op]bool{
		wire.OpShares: true, wire.OpStat: true, wire.OpStatfs: true, wire.OpMkdir: true,
		wire.OpSymlink: true, wire.OpLink: true, wire.OpUnlink: true, wire.OpRmdir: true,
		wire.OpRename: true, wire.OpSetAttr: true, wire.OpGetXattr: true,
		wire.OpListXattr: true, wire.OpSetXattr: true, wire.OpRemoveXattr: true, wire.OpMknod: true,
	}
	small := map[wire.Op]bool{wire.OpWrite: true, wire.OpCreate: true}
	// Requests about the link, not a share: the node answers them before they reach a
	// Handler (node/rekey.go usageHandler), which answers UNSUPPORTED.
	linkLevel := map[wire.Op]bool{wire.OpPunch: true}
	var h Handler
	for _, op := range wire.Ops() {
		if linkLevel[op] {
			if routes[op].serve != nil {
				t.Errorf("%v is the node's but has a route", op)
			}
			continue
		}
		if !op.IsRequest() {
			if routes[op].serve != nil {
				t.Errorf("%v is not a request but has a route", op)
			}
			continue
		}
		if routes[op].serve == nil {
			t.Errorf("request %v has no route", op)
		}
		if got := h.Inline(op, 100); got != onLoop[op] && !small[op] {
			t.Errorf("Inline(%v, 100) = %v", op, got)
		}
		if small[op] && (!h.Inline(op, inlineWrite) || h.Inline(op, 2*inlineWrite+wire.MaxPathLen)) {
			t.Errorf("%v: a small one is not served on the read loop, or a large one is", op)
		}
	}
}

// TestChangesApplicable: APPLY can apply every op wire.Applicable names, and only those.
func TestChangesApplicable(t *testing.T) {
	for op := range 256 {
		if got, want := changes[op] != nil, wire.Applicable(wire.Op(op)); got != want {
			t.Errorf("%v: APPLY applies it: %v, wire.Applicable: %v", wire.Op(op), got, want)
		}
	}
}
