package node

import (
	"context"
	"sync"

	"github.com/peerfs/peerfs/internal/api"
)

// Windows has no FUSE that go-fuse drives, so a node there serves shares, pulls and sends,
// and answers every mount request with errNoMount.

func errNoMount() error {
	return api.Errorf(api.CodeInvalid, "mounting is not available on Windows yet: "+
		"copy files with \"peerfs pull PEER:SHARE/PATH DEST\" and \"peerfs send PATH PEER:SHARE\"")
}

type mounts struct {
	mu       sync.Mutex
	cacheDir string
}

func (n *Node) Mount(ctx context.Context, a api.MountParams) (*api.MountInfo, error) {
	return nil, errNoMount()
}

func (n *Node) Unmount(ctx context.Context, a api.UnmountParams) error { return errNoMount() }

func (n *Node) Mounts(ctx context.Context) (*api.MountsResult, error) {
	return &api.MountsResult{Mounts: []api.MountInfo{}}, nil
}

func (n *Node) Stats(ctx context.Context, a api.UnmountParams) (*api.StatsResult, error) {
	return nil, errNoMount()
}

func (n *Node) ServeMount(ctx context.Context, a api.MountParams, mounted func(*api.MountInfo)) error {
	return errNoMount()
}

func (n *Node) restoreMounts(ctx context.Context) {}

func (n *Node) unmountAll() {}
