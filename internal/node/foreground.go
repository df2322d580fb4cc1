//go:build !windows

package node

import (
	"context"

	"github.com/peerfs/peerfs/internal/api"
)

// ServeMount is "peerfs mount --foreground": it runs a standalone node (Options.Standalone)
// that serves one mount without a daemon, like sshfs. The node dials the peer (it binds no
// listener, so the peer needs an address), mounts, and serves until ctx ends, then unmounts
// and returns nil; or until the mount is unmounted from outside (fusermount3 -u, or
// "peerfs unmount" through its own control socket), and returns nil too. mounted is called
// once the mount is up.
//
// It may run beside the daemon of the same home: the peer keeps serving both links (see
// peer.setSession), and the cache directory given in Options.CacheDir is the mount's own.
func (n *Node) ServeMount(ctx context.Context, a api.MountParams, mounted func(*api.MountInfo)) error {
	p, err := n.peerByName(a.Peer)
	if err != nil {
		return err
	}
	if p.addr() == "" && len(n.relayClients()) == 0 {
		return api.Errorf(api.CodePeerUnreachable, "peer %s has no address and no relay is configured, and a foreground mount only dials out: "+
			"mount through the daemon (without --foreground), give the peer an address (\"peerfs peer set %s --addr HOST:PORT\") "+
			"or add a relay you both use (\"peerfs relay add URL\")", a.Peer, a.Peer)
	}

	// The links outlive ctx until the mount is down: the unmount may still flush.
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		n.Run(runCtx)
	}()
	defer func() {
		stop()
		<-ran
	}()

	m, err := n.mount(ctx, a, false)
	if err != nil {
		return err
	}
	if mounted != nil {
		mounted(&m.info)
	}
	select {
	case <-m.done:
		return nil
	case <-ctx.Done():
	}
	if err := m.srv.Unmount(); err != nil {
		// Busy: a shell inside it, a file open. Do what sshfs does on exit (a lazy unmount),
		// but keep serving the programs still using it, so no data they write is lost.
		if derr := detach(m.info.Dir); derr != nil {
			return api.Errorf(api.CodeInternal, "cannot unmount %s: %v; and a lazy unmount failed: %v", m.info.Dir, err, derr)
		}
		n.log.Warn("the mount is busy: it is detached, and still served to the programs that use it until they "+
			"close it (interrupt again to stop at once)", "dir", m.info.Dir)
	}
	<-m.done
	return nil
}
