//go:build !windows

package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/cache"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/fusefs"
	"github.com/peerfs/peerfs/internal/outbox"
	"github.com/peerfs/peerfs/internal/remote"
	"github.com/peerfs/peerfs/internal/wire"
)

// defaultWait bounds how long a mount operation waits for a lost link before failing with EIO.
const defaultWait = 30 * time.Second

// mounts are the node's FUSE mounts, by directory.
type mounts struct {
	mu       sync.Mutex
	byDir    map[string]*mount
	cache    *cache.Store // shared by all mounts; opened on first mount
	cacheDir string       // set by New
	// stopping is set when the node stops: mounts that end from then on stay remembered,
	// so that the daemon mounts them again when it starts.
	stopping  bool
	restoring map[string]*restoreJob // remembered mounts not mounted yet, by directory
	restores  sync.WaitGroup         // restore goroutines
}

type mount struct {
	info   api.MountInfo
	root   *fusefs.Root
	srv    *fuse.Server
	cancel context.CancelFunc // stops the event subscription
	done   chan struct{}      // closed when the server has exited
	// journal holds the changes of a journaling mount until the owner has them; closed
	// once the server has exited.
	journal *outbox.Outbox
	// watching is closed once the first event subscription is up, or refused (watchLoop).
	watching  chan struct{}
	watchOnce sync.Once
}

// watchWait is how long Mount waits for the event subscription when the peer is linked: a
// change made on the owner right after the mount command returns is then reported.
const watchWait = 5 * time.Second

// unmountDrain is how long an unmounted journaling mount waits for its changes to reach a
// reachable owner before it closes the journal that keeps them.
const unmountDrain = 10 * time.Second

// restoreJob is a remembered mount being mounted again; cancel stops it (an unmount, a new
// mount of the same directory, or the node stopping).
type restoreJob struct {
	cancel context.CancelFunc
}

// store opens the chunk cache on first use.
func (n *Node) store() (*cache.Store, error) {
	n.mounts.mu.Lock()
	defer n.mounts.mu.Unlock()
	if n.mounts.cache == nil {
		st, err := cache.Open(cache.Options{Dir: n.mounts.cacheDir, Logger: n.log})
		if errors.Is(err, cache.ErrLocked) {
			return nil, api.Errorf(api.CodeInternal, "the cache %s is in use by another peerfs process: "+
				"stop it, or use another mount point", n.mounts.cacheDir)
		}
		if err != nil {
			return nil, fmt.Errorf("opening the cache: %w", err)
		}
		n.mounts.cache = st
	}
	return n.mounts.cache, nil
}

// Mount mounts a peer's share at a local directory; the daemon serves it until Unmount,
// fusermount3 -u, or the daemon stops. A daemon remembers the mount (config.RememberMount)
// until it is unmounted, and mounts it again when it starts.
func (n *Node) Mount(ctx context.Context, a api.MountParams) (*api.MountInfo, error) {
	// The user's mount wins over a remembered one still waiting for its peer.
	n.stopRestore(filepath.Clean(a.Dir))
	m, err := n.mount(ctx, a, !n.alone)
	if err != nil {
		return nil, err
	}
	return &m.info, nil
}

// mount checks the mount point, the link and the share, then mounts. With remember the
// mount is recorded before it is served, so that an unmount from outside, however soon,
// finds the record to forget.
func (n *Node) mount(ctx context.Context, a api.MountParams, remember bool) (*mount, error) {
	if !filepath.IsAbs(a.Dir) {
		return nil, api.Errorf(api.CodeInvalid, "mount point %q must be an absolute path", a.Dir)
	}
	a.Dir = filepath.Clean(a.Dir)
	n.mounts.mu.Lock()
	_, busy := n.mounts.byDir[a.Dir]
	n.mounts.mu.Unlock()
	if busy {
		return nil, api.Errorf(api.CodeInvalid, "%s is already a peerfs mount: unmount it first", a.Dir)
	}
	if err := n.checkMountPoint(a.Dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, api.Errorf(api.CodeInternal, "/dev/fuse is missing: load the fuse module (modprobe fuse) or install fuse3")
	}
	mapIDs, err := idmap(&a)
	if err != nil {
		return nil, err
	}
	journaling, err := writesMode(&a)
	if err != nil {
		return nil, err
	}
	p, top, err := n.shareTop(ctx, a.Peer, a.Share)
	if err != nil {
		return nil, err
	}
	st, err := n.store()
	if err != nil {
		return nil, err
	}
	release, err := n.reserveDir(a.Dir)
	if err != nil {
		return nil, err
	}
	if remember {
		if err := config.RememberMount(n.paths, configMount(a)); err != nil {
			release()
			return nil, fmt.Errorf("remembering the mount for the daemon's next start: %w", err)
		}
	}

	wait := defaultWait
	if a.WaitSeconds > 0 {
		wait = time.Duration(a.WaitSeconds) * time.Second
	}
	owner := remote.NewShare(mountLink{p: p, wait: wait}, a.Share)
	var root *fusefs.Root
	var box *outbox.Outbox
	if journaling {
		if box, err = n.openJournal(a, &root); err != nil {
			if remember {
				n.forget(a.Dir)
			}
			release()
			return nil, err
		}
	}
	root = fusefs.New(fusefs.Options{
		Peer: a.Peer, Share: a.Share, Owner: owner, Cache: st, Journal: box, JournalWait: wait,
		Blksize: a.Blksize, Inline: uint32(a.Inline), Passthrough: !a.NoPassthrough,
		Readahead: a.Readahead, KernelReadahead: a.KernelReadahead, ReadsInFlight: a.ReadsInFlight,
		WritesInFlight: a.WritesInFlight, Piece: a.Piece,
		Events: true, UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Logger: n.log.With("mount", a.Dir),
		OwnerUID: top.UID, OwnerGID: top.GID, MapIDs: mapIDs, AllowOther: a.AllowOther,
	})
	// The journal runs before the mount serves: the kernel's first questions wait for the
	// changes it holds from before a restart to reach the owner.
	wctx, cancel := context.WithCancel(context.Background())
	if box != nil {
		go n.runJournal(wctx, box, owner, a.Dir)
	}
	srv, err := root.Mount(a.Dir)
	if err != nil {
		cancel()
		if box != nil {
			box.Close()
		}
		if remember {
			n.forget(a.Dir)
		}
		release()
		hint := "is fuse3 installed?"
		if a.AllowOther && os.Getuid() != 0 {
			hint = "--allow-other needs the line user_allow_other in /etc/fuse.conf"
		}
		return nil, api.Errorf(api.CodeInternal, "mounting %s: %v (%s)", a.Dir, err, hint)
	}
	m := &mount{
		info: api.MountInfo{Peer: a.Peer, Share: a.Share, Dir: a.Dir, Since: time.Now(), Events: true,
			Passthrough: !a.NoPassthrough, Blksize: max(a.Blksize, 0), Idmap: a.Idmap, AllowOther: a.AllowOther,
			Writes: a.Writes},
		root: root, srv: srv, cancel: cancel, done: make(chan struct{}), watching: make(chan struct{}),
		journal: box,
	}
	if m.info.Blksize == 0 {
		m.info.Blksize = fusefs.DefaultBlksize
	}
	n.mounts.mu.Lock()
	n.mounts.byDir[a.Dir] = m
	n.mounts.mu.Unlock()
	go n.watchLoop(wctx, m, p, a.Share)
	// Return once the event subscription is up (the link is), so that every change made
	// on the owner after the mount command returns is reported.
	select {
	case <-m.watching:
	case <-time.After(watchWait):
		n.log.Info("change events not flowing yet; the mount learns of changes once they do", "dir", a.Dir)
	case <-ctx.Done():
	}
	go n.unmounted(m)
	n.log.Info("mounted", "peer", a.Peer, "share", a.Share, "dir", a.Dir)
	return m, nil
}

// shareTop returns the peer and the attributes of the top of its share: the share must exist
// for us before anything is mounted, and its folder's owner and group are taken for the
// owner's own (fusefs/owners.go).
func (n *Node) shareTop(ctx context.Context, peer, share string) (*peer, wire.Entry, error) {
	p, sess, u, err := n.use(ctx, peer)
	if err != nil {
		return nil, wire.Entry{}, err
	}
	defer u.done()
	top, err := (remote.Peer{S: sess}).Stat(ctx, share, "")
	if err != nil {
		return nil, wire.Entry{}, apiError(err, "mount "+peer+":"+share)
	}
	return p, top, nil
}

// reserveDir records dir as being mounted, unless a mount has it; release undoes that.
func (n *Node) reserveDir(dir string) (release func(), err error) {
	n.mounts.mu.Lock()
	defer n.mounts.mu.Unlock()
	if n.mounts.byDir == nil {
		n.mounts.byDir = map[string]*mount{}
	}
	if _, busy := n.mounts.byDir[dir]; busy {
		return nil, api.Errorf(api.CodeInvalid, "%s is already a peerfs mount: unmount it first", dir)
	}
	n.mounts.byDir[dir] = nil // reserved while mounting
	return func() {
		n.mounts.mu.Lock()
		delete(n.mounts.byDir, dir)
		n.mounts.mu.Unlock()
	}, nil
}

// idmap checks a.Idmap, filling in its default, and reports whether the owner's IDs are
// shown as the mounting user's.
func idmap(a *api.MountParams) (bool, error) {
	switch a.Idmap {
	case "", "user":
		a.Idmap = "user"
		return true, nil
	case "none":
		return false, nil
	}
	return false, api.Errorf(api.CodeInvalid, "--idmap %q: use user (the owner's files show as yours) or none (IDs as the owner numbers them)", a.Idmap)
}

// unmounted waits for m's server to end (an unmount, also by fusermount3 -u) and forgets m.
func (n *Node) unmounted(m *mount) {
	m.srv.Wait()
	m.cancel()
	if m.journal != nil {
		// Give what waits a moment to reach a reachable owner; what is left stays on disk,
		// and the next mount of the share here sends it.
		if st := m.journal.Status(); st.Waiting > 0 && st.Online {
			ctx, cancel := context.WithTimeout(context.Background(), unmountDrain)
			m.journal.Sync(ctx, m.journal.Last())
			cancel()
		}
		if st := m.journal.Status(); st.Waiting > 0 {
			n.log.Warn("unmounted with changes not yet on the owner: they are sent when the share is mounted here again",
				"dir", m.info.Dir, "changes", st.Waiting, "bytes", st.WaitingBytes)
		}
		m.journal.Close()
	}
	dir := m.info.Dir
	// Unmounted by the user (peerfs unmount, fusermount3 -u): forget it. Unmounted because
	// the daemon stops: keep it, to mount it again at the next start.
	n.mounts.mu.Lock()
	keep := n.mounts.stopping || n.alone
	n.mounts.mu.Unlock()
	if !keep {
		n.forget(dir)
	}
	n.mounts.mu.Lock()
	if n.mounts.byDir[dir] == m {
		delete(n.mounts.byDir, dir)
	}
	n.mounts.mu.Unlock()
	close(m.done)
	n.log.Info("unmounted", "dir", dir)
}

// checkMountPoint makes sure dir can take a mount: an existing empty directory that is not
// a FUSE mount already. A dead FUSE mount there, left by a peerfs process that crashed or
// was killed ("transport endpoint is not connected"), is detached first.
func (n *Node) checkMountPoint(dir string) error {
	fi, err := os.Stat(dir)
	fstype := ""
	if err == nil {
		fstype = mountType(dir)
	}
	if strings.HasPrefix(fstype, "fuse") {
		// stat may answer from the kernel's attribute cache even when the server is gone;
		// reading the directory asks the server.
		d, oerr := os.Open(dir)
		if oerr == nil {
			_, oerr = d.Readdirnames(1)
			d.Close()
		}
		if !errors.Is(oerr, syscall.ENOTCONN) {
			return api.Errorf(api.CodeInvalid, "%s is already a mount (%s): unmount it first (\"peerfs unmount %s\" or \"fusermount3 -u %s\")",
				dir, fstype, dir, dir)
		}
		err = oerr
	}
	if errors.Is(err, syscall.ENOTCONN) {
		n.log.Warn("the mount point is a dead FUSE mount (its server is gone); detaching it", "dir", dir)
		if err := detach(dir); err != nil {
			return api.Errorf(api.CodeInternal, "%s is a dead FUSE mount and detaching it failed: %v: run \"fusermount3 -u -z %s\"", dir, err, dir)
		}
		fi, err = os.Stat(dir)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist) || err == nil && !fi.IsDir():
		return api.Errorf(api.CodeNotFound, "mount point %s is not an existing directory: create it first", dir)
	case err != nil:
		return apiError(err, "mount point "+dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return apiError(err, "mount point "+dir)
	}
	names, _ := d.Readdirnames(1)
	d.Close()
	if len(names) > 0 {
		return api.Errorf(api.CodeInvalid, "mount point %s is not empty: mount on an empty directory (the mount would hide its files)", dir)
	}
	return nil
}

// Unmount unmounts a mount by directory. A remembered mount that is not mounted (its
// restore failed or waits for its peer) is forgotten.
func (n *Node) Unmount(ctx context.Context, a api.UnmountParams) error {
	dir := filepath.Clean(a.Dir)
	n.mounts.mu.Lock()
	m := n.mounts.byDir[dir]
	n.mounts.mu.Unlock()
	if m == nil {
		if !n.alone && n.forgetUnmounted(dir) {
			n.log.Info("forgot the remembered mount", "dir", dir)
			return nil
		}
		return api.Errorf(api.CodeNotFound, "%s is not a peerfs mount of this daemon (see \"peerfs mounts\")", a.Dir)
	}
	if err := m.srv.Unmount(); err != nil {
		return api.Errorf(api.CodeInternal, "unmounting %s: %v (is a program still using it? see fuser -m %s)", a.Dir, err, a.Dir)
	}
	select {
	case <-m.done:
	case <-ctx.Done():
		// A foreground mount's socket is shut as soon as the mount is down, which cancels
		// this call just when it succeeded.
		select {
		case <-m.done:
		default:
			return ctx.Err()
		}
	}
	return nil
}

// Mounts lists the mounts.
func (n *Node) Mounts(ctx context.Context) (*api.MountsResult, error) {
	n.mounts.mu.Lock()
	defer n.mounts.mu.Unlock()
	res := &api.MountsResult{Mounts: []api.MountInfo{}}
	for _, m := range n.mounts.byDir {
		if m != nil {
			info := m.info
			info.Journal = journalInfo(m.root)
			res.Mounts = append(res.Mounts, info)
		}
	}
	return res, nil
}

// Stats reports a mount's per-operation counters.
func (n *Node) Stats(ctx context.Context, a api.UnmountParams) (*api.StatsResult, error) {
	n.mounts.mu.Lock()
	m := n.mounts.byDir[filepath.Clean(a.Dir)]
	n.mounts.mu.Unlock()
	if m == nil {
		return nil, api.Errorf(api.CodeNotFound, "%s is not a peerfs mount of this daemon (see \"peerfs mounts\")", a.Dir)
	}
	rep := m.root.Stats()
	res := &api.StatsResult{Mount: m.info, Ops: []api.OpStats{}, Counters: rep.Counters}
	for _, o := range rep.Ops {
		res.Ops = append(res.Ops, api.OpStats{Name: o.Name, Calls: o.Calls, Bytes: o.Bytes, Min: o.Min, Avg: o.Avg, Max: o.Max,
			TotalMs: o.Millis})
	}
	return res, nil
}

// unmountAll unmounts everything when the node stops. The mounts stay remembered.
func (n *Node) unmountAll() {
	n.mounts.mu.Lock()
	n.mounts.stopping = true
	for _, j := range n.mounts.restoring {
		j.cancel()
	}
	n.mounts.mu.Unlock()
	n.mounts.restores.Wait()

	n.mounts.mu.Lock()
	var all []*mount
	for _, m := range n.mounts.byDir {
		if m != nil {
			all = append(all, m)
		}
	}
	st := n.mounts.cache
	n.mounts.mu.Unlock()
	for _, m := range all {
		if err := m.srv.Unmount(); err != nil {
			n.log.Warn("unmount at shutdown failed", "dir", m.info.Dir, "err", err)
			continue
		}
		<-m.done
	}
	if st != nil {
		st.Close()
	}
}

// watchLoop keeps a change-event subscription to the mounted share and applies the events.
// After a lost link it resubscribes and tells the mount to rescan, since events were missed.
func (n *Node) watchLoop(ctx context.Context, m *mount, p *peer, share string) {
	missed := false
	for ctx.Err() == nil {
		sess, err := p.session(ctx, time.Hour, false)
		if err != nil {
			// A refusal comes back at once: do not ask again in a tight loop.
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
			continue
		}
		sub, err := (remote.Peer{S: sess}).Watch(ctx, share)
		if err != nil {
			m.watchOnce.Do(func() { close(m.watching) }) // Mount waits no longer for it
			if ctx.Err() == nil {
				n.log.Warn("change events unavailable; metadata may be stale", "dir", m.info.Dir, "err", err)
				select {
				case <-ctx.Done():
				case <-sess.Done():
				case <-time.After(5 * time.Second):
				}
			}
			continue
		}
		if missed {
			m.root.ApplyEvents([]wire.Event{{Kind: wire.EventRescan, Path: ""}})
		}
		m.root.EventsFlowing(!missed)
		m.watchOnce.Do(func() { close(m.watching) })
		for {
			events, err := remote.NextEvents(ctx, sub)
			if err != nil {
				break
			}
			m.root.ApplyEvents(events)
		}
		m.root.EventsStopped()
		sub.Close()
		missed = true
	}
}
