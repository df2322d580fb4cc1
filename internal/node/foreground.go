//go:build !windows

package node

import (
	"context"
	"errors"
	"strings"

	"github.com/peerfs/peerfs/internal/api"
)

// ServeMount is "peerfs mount --foreground": it runs a standalone node (Options.Standalone)
// that serves one mount without a daemon, like sshfs. The node dials the peer (it binds no
// listener): at its address, where LAN discovery hears it, or through a relay; then it
// mounts, and serves until ctx ends, then unmounts and returns nil; or until the mount is unmounted from outside (fusermount3 -u, or
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
	// The node binds no listener: it reaches the peer at its address, at an address LAN
	// discovery hears it at, or through a relay; with none of the three it never can.
	n.mu.Lock()
	lan := n.disc.on && n.cfg.DiscoveryOn()
	n.mu.Unlock()
	relays := len(n.relayClients()) > 0
	if p.addr() == "" && !relays && !lan {
		return api.Errorf(api.CodePeerUnreachable, "peer %s has no address, no relay is configured and LAN discovery is off, and a foreground mount only dials out: "+
			"mount through the daemon (without --foreground), give the peer an address (\"peerfs peer set %s --addr HOST:PORT\"), "+
			"add a relay you both use (\"peerfs relay add URL\") or turn LAN discovery on", a.Peer, a.Peer)
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
		if api.CodeOf(err) == api.CodePeerUnreachable && p.addr() == "" {
			var ways []string
			if lan {
				ways = append(ways, "on the LAN")
			}
			if relays {
				ways = append(ways, "at the relays")
			}
			p.mu.Lock()
			last := p.lastErr
			p.mu.Unlock()
			detail := ""
			if last != nil && !errors.Is(last, errNoCandidate) {
				detail = " (last attempt: " + last.Error() + ")"
			}
			return api.Errorf(api.CodePeerUnreachable, "peer %s was not found %s within %v%s, and a foreground mount only dials out: "+
				"check that the peer's daemon runs, mount through the daemon (without --foreground), or give the peer an address (\"peerfs peer set %s --addr HOST:PORT\")",
				a.Peer, strings.Join(ways, " or "), connectWait, detail, a.Peer)
		}
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
