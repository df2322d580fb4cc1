// Package daemon runs the peerfs daemon process: it loads the device identity, starts the node
// (peers, shares, transfers), serves the control API on the runtime socket and handles
// signals. It is the process's life and nothing more: what the daemon does for peers lives in
// node, how the CLI talks to it in api. It never prints; it logs through the Logger it is given.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/metrics"
	"github.com/peerfs/peerfs/internal/node"
)

// Options configure Run.
type Options struct {
	Paths  config.Paths
	Listen string       // the --listen flag; empty falls back to $PEERFS_LISTEN, the config file, the default
	Logger *slog.Logger // nil discards logs
	// Metrics is the --metrics flag: where to serve Prometheus metrics; empty falls back to
	// $PEERFS_METRICS, then the config file; none of them set means no metrics.
	Metrics string
	// MetricsPublic is --metrics-public: serve metrics on an address that is not loopback
	// (the config file's metrics_public does the same).
	MetricsPublic bool
	// NoDiscovery is --no-discovery: no LAN discovery (the config file's "discovery": false
	// does the same). DiscoveryEpoch shortens the discovery epoch (tests only).
	NoDiscovery    bool
	DiscoveryEpoch time.Duration
}

// Run runs the daemon until ctx is done, then stops it and returns nil. It returns an error
// if the daemon cannot start (no identity or config, a daemon already running for this home,
// the listen address taken, a metrics address refused or taken) or if the node or the API
// server fails. SIGHUP reloads the config file (the metrics address is read at start only).
// The control socket is removed on return.
func Run(ctx context.Context, opts Options) error {
	raiseProcs()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	raiseOpenFiles(log)
	p := opts.Paths

	id, err := identity.Load(p.IdentityDir())
	if err != nil {
		return err // identity's message already says to run "peerfs init"
	}
	cfg, err := config.Load(p)
	if err != nil {
		return err
	}

	// The socket comes first: a second daemon for the same home is then refused with a clear
	// message instead of failing to bind the peer port.
	sock, err := api.Listen(p.Socket())
	if err != nil {
		return err
	}
	defer sock.Close()

	// The metrics listener comes before the node's: a refused or taken address stops the
	// daemon before it links to anyone.
	var metricsLn net.Listener
	if addr := cfg.ResolveMetrics(opts.Metrics); addr != "" {
		metricsLn, err = metrics.Listen(addr, opts.MetricsPublic || cfg.MetricsPublic)
		if err != nil {
			return err
		}
		defer metricsLn.Close()
	}

	n, err := node.New(node.Options{
		Paths:    p,
		Identity: id,
		Listen:   cfg.ResolveListen(opts.Listen),
		Logger:   log,

		Discovery:      !opts.NoDiscovery,
		DiscoveryEpoch: opts.DiscoveryEpoch,
	})
	if err != nil {
		return fmt.Errorf("starting node: %w", err)
	}

	log.Info(fmt.Sprintf("peerfs daemon: device %s listening on %s, control socket %s", id.ID, n.Addr(), p.Socket()))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	nodeDone := make(chan error, 1)
	go func() { nodeDone <- n.Run(ctx) }()
	apiDone := make(chan error, 1)
	go func() { apiDone <- api.Serve(ctx, sock, n, log) }()
	metricsDone := make(chan struct{})
	if metricsLn != nil {
		log.Info("serving metrics", "url", "http://"+metricsLn.Addr().String()+metrics.Path)
		go func() {
			defer close(metricsDone)
			// Metrics are an aid: the daemon goes on without them.
			if err := metrics.Serve(ctx, metricsLn, n, log); err != nil {
				log.Error("metrics stopped", "err", err)
			}
		}()
	} else {
		close(metricsDone)
	}

	// Wait for the first of: ctx done, a part failing; then stop and wait for both parts.
	var nodeErr, apiErr error
	nodeRunning, apiRunning := true, true
	for nodeRunning || apiRunning {
		select {
		case <-hup:
			if err := n.Reload(ctx); err != nil {
				log.Warn("reload on SIGHUP failed", "err", err)
			} else {
				log.Info("config reloaded on SIGHUP")
			}
		case nodeErr = <-nodeDone:
			nodeRunning = false
			cancel()
		case apiErr = <-apiDone:
			apiRunning = false
			cancel()
		}
	}
	<-metricsDone
	if errors.Is(nodeErr, context.Canceled) {
		nodeErr = nil
	}
	if err := errors.Join(nodeErr, apiErr); err != nil {
		return err
	}
	log.Info("peerfs daemon stopped")
	return nil
}
