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
