package daemon

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/node"
)

// MountOptions configure Mount.
type MountOptions struct {
	Paths   config.Paths
	Mount   api.MountParams      // Dir must be absolute
	Logger  *slog.Logger         // nil discards logs
	Mounted func(*api.MountInfo) // called once the mount is up
}

// Mount runs "peerfs mount --foreground": this process serves one mount without a daemon,
// until ctx is done (then it unmounts and returns nil) or the mount is unmounted from
// outside (nil too). It loads the identity and config as the daemon does, but listens for
// no peer and keeps no state: it dials the peer, and its chunk cache is the mount point's
// own (config.Paths.MountCache), so it runs beside the home's daemon without contention.
//
// A small control socket of its own (config.Paths.MountSocket) answers "peerfs stats",
// "peerfs mounts" and "peerfs unmount" for the mount point.
func Mount(ctx context.Context, opts MountOptions) error {
	raiseProcs()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p, dir := opts.Paths, opts.Mount.Dir
	if !filepath.IsAbs(dir) {
		return api.Errorf(api.CodeInvalid, "mount point %q must be an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	opts.Mount.Dir = dir

	id, err := identity.Load(p.IdentityDir())
	if err != nil {
		return err // identity's message already says to run "peerfs init"
	}
	sockPath := p.MountSocket(dir)
	if c, err := api.Dial(sockPath); err == nil {
		c.Close()
		return api.Errorf(api.CodeInvalid, "%s is already served by another \"peerfs mount --foreground\": stop it first", dir)
	}
	sock, err := api.Listen(sockPath)
	if err != nil {
		return err
	}
	defer sock.Close()

	n, err := node.New(node.Options{Paths: p, Identity: id, Logger: log, Standalone: true, CacheDir: p.MountCache(dir),
		Discovery: true})
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- api.Serve(sctx, sock, foregroundAPI{n}, log) }()
	err = n.ServeMount(ctx, opts.Mount, opts.Mounted)
	stop()
	<-served
	return err
}

// foregroundAPI is what a foreground mount's control socket answers: its mount, nothing
// that belongs to the daemon.
type foregroundAPI struct{ n *node.Node }

var _ api.Backend = foregroundAPI{}

func (f foregroundAPI) Status(ctx context.Context) (*api.StatusResult, error) { return f.n.Status(ctx) }
func (f foregroundAPI) Mounts(ctx context.Context) (*api.MountsResult, error) { return f.n.Mounts(ctx) }
func (f foregroundAPI) Unmount(ctx context.Context, p api.UnmountParams) error {
	return f.n.Unmount(ctx, p)
}
func (f foregroundAPI) Stats(ctx context.Context, p api.UnmountParams) (*api.StatsResult, error) {
	return f.n.Stats(ctx, p)
}

var errNotDaemon = api.Errorf(api.CodeInvalid, "this is a foreground mount's socket: it answers only status, mounts, stats and unmount")

func (foregroundAPI) Reload(context.Context) error { return errNotDaemon }
func (foregroundAPI) List(context.Context, api.ListParams) (*api.ListResult, error) {
	return nil, errNotDaemon
}
func (foregroundAPI) Pull(context.Context, api.PullParams, func(api.Event)) (*api.TransferResult, error) {
	return nil, errNotDaemon
}
func (foregroundAPI) Send(context.Context, api.SendParams, func(api.Event)) (*api.TransferResult, error) {
	return nil, errNotDaemon
}
func (foregroundAPI) Mount(context.Context, api.MountParams) (*api.MountInfo, error) {
	return nil, errNotDaemon
}
