package share

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/peerfs/peerfs/internal/loopback"
	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/rpc"
	"github.com/peerfs/peerfs/internal/wire"
)

// servePeer serves sh with a Server over a real loopback TCP connection and returns the
// client side, as a peer sees the share.
func servePeer(t testing.TB, sh *Share) remote.Peer {
	t.Helper()
	ca, cb := loopback.Pair(t)
	sv := &Server{
		Lookup: func(name string) (*Share, bool) { return sh, name == sh.Name() },
		List:   func() []wire.ShareInfo { return []wire.ShareInfo{{Name: sh.Name()}} },
	}
	var sb *rpc.Session
	var errb error
	done := make(chan struct{})
	go func() {
		sb, errb = rpc.New(cb, rpc.Options{Name: "owner", Handler: sv})
		close(done)
	}()
	sa, err := rpc.New(ca, rpc.Options{Name: "peer"})
	<-done
	if err != nil || errb != nil {
		t.Fatalf("rpc.New: %v / %v", err, errb)
	}
	t.Cleanup(func() { sa.Close(nil); sb.Close(nil) })
	return remote.Peer{S: sa}
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
	fx := newFixture(t, false)
	p := servePeer(t, fx.s)
	buf := make([]byte, 16)
	for _, off := range []uint64{1 << 63, math.MaxUint64} {
		_, err := p.Read(context.Background(), "test", "a.txt", off, buf)
		if got := remoteCode(err); got != wire.EINVAL {
			t.Errorf("READ at %#x: %v (code %v), want EINVAL", off, err, got)
		}
	}
}
