package transfer

import (
	"testing"

	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/serve"
	"github.com/peerfs/peerfs/internal/share"
	"github.com/peerfs/peerfs/internal/sharetest"
	"github.com/peerfs/peerfs/internal/wire"
)

// servePeer opens dir as the share name and serves it over a real loopback TCP connection
// (sharetest.Serve); it returns the client side, as a peer sees the share.
func servePeer(t testing.TB, name, dir string) remote.Peer {
	t.Helper()
	sh, err := share.Open(name, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	return sharetest.Serve(t, &serve.Handler{
		Lookup: func(n string) (*share.Share, bool) { return sh, n == name },
		List:   func() []wire.ShareInfo { return []wire.ShareInfo{{Name: name}} },
	})
}
