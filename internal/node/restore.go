//go:build !windows

package node

import (
	"context"
	"slices"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
)

// A daemon remembers its mounts in config.MountsFile: a mount is recorded when it is made,
// forgotten when the user unmounts it (peerfs unmount, or fusermount3 -u from outside), and
// kept when the daemon stops, so that the next start mounts it again.

// restoreMounts mounts again what the daemon had mounted when it last stopped, each mount
// in a goroutine of its own so that starting waits for no peer. A mount that fails stays
// remembered, with one log line; one whose peer is unreachable is mounted when the peer
// connects.
func (n *Node) restoreMounts(ctx context.Context) {
	// Under the lock, so that an unmount of a remembered mount (forgetUnmounted) either
	// comes first and the list lacks it, or comes after and finds its job to cancel.
	n.mounts.mu.Lock()
	defer n.mounts.mu.Unlock()
	list, err := config.LoadMounts(n.paths)
	if err != nil {
		n.log.Warn("cannot restore mounts", "err", err)
		return
	}
	if n.mounts.restoring == nil {
		n.mounts.restoring = map[string]*restoreJob{}
	}
	for _, m := range list {
		rctx, cancel := context.WithCancel(ctx)
		job := &restoreJob{cancel: cancel}
		n.mounts.restoring[m.Dir] = job
		n.mounts.restores.Add(1)
		go func() {
			defer n.mounts.restores.Done()
			n.restore(rctx, m)
			cancel()
			n.mounts.mu.Lock()
			if n.mounts.restoring[m.Dir] == job {
				delete(n.mounts.restoring, m.Dir)
			}
			n.mounts.mu.Unlock()
		}()
	}
}

// restore mounts one remembered mount once its peer is connected. It waits for the link
// instead of asking for it: the dial loop keeps its backoff while the peer is away.
func (n *Node) restore(ctx context.Context, m config.Mount) {
	a := api.MountParams{Peer: m.Peer, Share: m.Share, Dir: m.Dir, Blksize: m.Blksize, Inline: m.Inline,
		NoPassthrough: m.NoPassthrough, WaitSeconds: m.WaitSeconds, Idmap: m.Idmap, AllowOther: m.AllowOther,
		Readahead: m.Readahead, KernelReadahead: m.KernelReadahead, ReadsInFlight: m.ReadsInFlight,
		WritesInFlight: m.WritesInFlight, Piece: m.Piece, Writes: m.Writes}
	keep := "it stays remembered until \"peerfs unmount " + m.Dir + "\""
	told := false
	for {
		p, err := n.peerByName(m.Peer)
		if err != nil {
			n.log.Warn("cannot restore the mount; "+keep, "peer", m.Peer, "share", m.Share, "dir", m.Dir, "err", err)
			return
		}
		if up, changed := p.linked(); !up {
			var later <-chan time.Time
			if !told {
				later = time.After(connectWait)
			}
			select {
			case <-changed:
			case <-later:
				n.log.Warn("cannot restore the mount yet: the peer is not connected; it is mounted when the peer connects",
					"peer", m.Peer, "share", m.Share, "dir", m.Dir)
				told = true
			case <-ctx.Done():
				return
			}
			continue
		}
		mt, err := n.mount(ctx, a, false)
		if err == nil && ctx.Err() != nil {
			mt.srv.Unmount() // unmounted or replaced while it was being mounted
		}
		if err == nil || ctx.Err() != nil {
			return
		}
		if api.CodeOf(err) != api.CodePeerUnreachable { // else the link dropped meanwhile: wait again
			n.log.Warn("cannot restore the mount; "+keep, "peer", m.Peer, "share", m.Share, "dir", m.Dir, "err", err)
			return
		}
	}
}

// linked reports whether the peer's link is up, and returns the channel closed at its next
// change.
func (p *peer) linked() (bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sess != nil && p.sess.Err() == nil, p.changed
}

// stopRestore cancels the restore of dir, if one runs.
func (n *Node) stopRestore(dir string) {
	n.mounts.mu.Lock()
	defer n.mounts.mu.Unlock()
	if j := n.mounts.restoring[dir]; j != nil {
		j.cancel()
		delete(n.mounts.restoring, dir)
	}
}

// forgetUnmounted forgets a remembered mount of dir that is not mounted (its restore failed
// or waits for the peer), stopping its restore, and reports whether there was one.
func (n *Node) forgetUnmounted(dir string) bool {
	n.mounts.mu.Lock()
	defer n.mounts.mu.Unlock()
	list, err := config.LoadMounts(n.paths)
	if err != nil || !slices.ContainsFunc(list, func(m config.Mount) bool { return m.Dir == dir }) {
		return false
	}
	if j := n.mounts.restoring[dir]; j != nil {
		j.cancel()
		delete(n.mounts.restoring, dir)
	}
	n.forget(dir)
	return true
}

// forget drops the record of the mount of dir; a failure is logged, since the mount itself
// is gone either way.
func (n *Node) forget(dir string) {
	if err := config.ForgetMount(n.paths, dir); err != nil {
		n.log.Warn("cannot forget the mount; the daemon will mount it again at its next start", "dir", dir, "err", err)
	}
}

func configMount(a api.MountParams) config.Mount {
	return config.Mount{Peer: a.Peer, Share: a.Share, Dir: a.Dir, Blksize: a.Blksize, Inline: a.Inline,
		NoPassthrough: a.NoPassthrough, WaitSeconds: a.WaitSeconds, Idmap: a.Idmap, AllowOther: a.AllowOther,
		Readahead: a.Readahead, KernelReadahead: a.KernelReadahead, ReadsInFlight: a.ReadsInFlight,
		WritesInFlight: a.WritesInFlight, Piece: a.Piece, Writes: a.Writes}
}
