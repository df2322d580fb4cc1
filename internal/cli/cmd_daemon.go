package cli

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/daemon"
	"github.com/peerfs/peerfs/internal/metrics"
)

// DaemonOptions are the flags of "peerfs daemon".
type DaemonOptions struct {
	Listen        string
	Metrics       string
	MetricsPublic bool
	NoDiscovery   bool
	// DiscoveryEpoch shortens the epoch after which LAN discovery tags change (tests only;
	// both devices must use the same).
	DiscoveryEpoch time.Duration
}

func newDaemonCommand(g *Globals) *cobra.Command {
	var opts DaemonOptions
	cmd := &cobra.Command{
		Use:   "daemon [--listen ADDR] [--metrics ADDR [--metrics-public]] [--no-discovery]",
		Short: "Run the daemon in the foreground",
		Long: `Run the peerfs daemon in the foreground: it listens for peers, connects to the peers
it knows, serves this device's shares, and answers the other peerfs commands over a
Unix socket in the runtime directory. It logs to stderr (--verbose for debug logs,
--quiet for warnings only, --json for JSON logs) and stops cleanly on SIGINT or SIGTERM.
SIGHUP makes it reread the config file.

The listen address is --listen, else $PEERFS_LISTEN, else "listen" in the config file,
else :7462. contrib/systemd/peerfs.service runs it as a systemd user service.

--metrics ADDR serves Prometheus metrics at http://ADDR/metrics (else $PEERFS_METRICS,
else "metrics" in the config file; off when none is set). ADDR must be a loopback
address (127.0.0.1, [::1], localhost), since the metrics name the peers and mount
points; --metrics-public (or "metrics_public": true in the config file) allows any
address. docs/METRICS.md lists the metrics.

Trusted peers on the same network find each other by themselves (mDNS): the daemon
announces tags that only its trusted peers can recognise, never its device ID or names,
and dials the peers it hears. --no-discovery (or "discovery": false in the config file)
turns that off; peers are then reached at their configured addresses, or when they dial.`,
		Example: `  peerfs daemon
  peerfs daemon --listen 127.0.0.1:7462 --verbose
  peerfs daemon --metrics 127.0.0.1:7463`,
		Args: argsRange(0, 0),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runDaemon(ctx, opts, g, args, g.Stderr)
		}),
	}
	cmd.Flags().StringVar(&opts.Listen, "listen", "", "listen for peers on `ADDR` (HOST:PORT; env PEERFS_LISTEN)")
	cmd.Flags().StringVar(&opts.Metrics, "metrics", "", "serve Prometheus metrics on `ADDR` (loopback HOST:PORT; env PEERFS_METRICS)")
	cmd.Flags().BoolVar(&opts.MetricsPublic, "metrics-public", false, "allow a --metrics address other machines can reach")
	cmd.Flags().BoolVar(&opts.NoDiscovery, "no-discovery", false, "do not announce or look for peers on the local network")
	cmd.Flags().DurationVar(&opts.DiscoveryEpoch, "discovery-epoch", 0, "how often LAN discovery tags change (tests only)")
	cmd.Flags().MarkHidden("discovery-epoch")
	return cmd
}

// runDaemon runs the daemon until ctx is done; logs go to logOut.
func runDaemon(ctx context.Context, opts DaemonOptions, g *Globals, args []string, logOut io.Writer) error {
	if opts.Listen != "" {
		if err := config.CheckAddr(opts.Listen); err != nil {
			return usageErrorf("--listen %q: %v", opts.Listen, err)
		}
	}
	if opts.Metrics != "" {
		if err := metrics.CheckAddr(opts.Metrics, opts.MetricsPublic); err != nil {
			return usageErrorf("%v", err)
		}
	}
	p, err := g.paths()
	if err != nil {
		return err
	}
	return daemon.Run(ctx, daemon.Options{Paths: p, Listen: opts.Listen, Metrics: opts.Metrics,
		MetricsPublic: opts.MetricsPublic, Logger: g.logger(logOut),
		NoDiscovery: opts.NoDiscovery, DiscoveryEpoch: opts.DiscoveryEpoch})
}

// logger is the log of a process that serves (the daemon, a foreground mount): logfmt, or
// JSON with --json; debug with --verbose, warnings only with --quiet.
func (g *Globals) logger(w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	switch {
	case g.Verbose:
		level = slog.LevelDebug
	case g.Quiet:
		level = slog.LevelWarn
	}
	hopts := &slog.HandlerOptions{Level: level}
	if g.JSON {
		return slog.New(slog.NewJSONHandler(w, hopts))
	}
	return slog.New(slog.NewTextHandler(w, hopts))
}
