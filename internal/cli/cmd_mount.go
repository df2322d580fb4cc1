package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/peerfs/peerfs/internal/api"
)

// MountOptions are the flags of "peerfs mount".
type MountOptions struct {
	Blksize       int
	Inline        int
	NoPassthrough bool
	Wait          int
}

func newMountCommand(g *Globals) *cobra.Command {
	var opts MountOptions
	cmd := &cobra.Command{
		Use:   "mount PEER:SHARE MOUNTPOINT",
		Short: "Mount a peer's share as a local folder",
		Long: `Mount PEER:SHARE at MOUNTPOINT (an existing empty directory). The daemon serves the
mount: metadata is replicated and kept fresh by change events the peer pushes, file contents
are fetched in chunks on demand, cached on disk and served from the cache afterwards (by FUSE
passthrough once a file is fully cached); writes reach the peer no later than close or fsync.
The mount shows as fuse.peerfs in /proc/mounts; unmount with "peerfs unmount" or
"fusermount3 -u".`,
		Example: `  peerfs mount desktop:projects ~/peers/desktop
  peerfs mount --blksize 262144 desktop:projects /mnt/p`,
		Args: argsRange(2, 2),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runMount(ctx, opts, g, args, g.Stdout)
		}),
	}
	f := cmd.Flags()
	f.IntVar(&opts.Blksize, "blksize", 0, "st_blksize and statfs block size to report, in bytes (default 1 MiB)")
	f.IntVar(&opts.Inline, "inline", 0, "inline the content of files up to this size in directory listings (default 4096)")
	f.BoolVar(&opts.NoPassthrough, "no-passthrough", false, "never serve cached files by FUSE passthrough")
	f.IntVar(&opts.Wait, "wait", 0, "seconds an operation waits for a lost link before failing with EIO (default 30)")
	return cmd
}

func runMount(ctx context.Context, opts MountOptions, g *Globals, args []string, out io.Writer) error {
	r, err := ParseRemote(args[0], true)
	if err != nil {
		return err
	}
	if r.Path != "" {
		return usageErrorf("mount a whole share (PEER:SHARE), not a path inside it")
	}
	dir, err := filepath.Abs(args[1])
	if err != nil {
		return err
	}
	var res api.MountInfo
	p := api.MountParams{Peer: r.Peer, Share: r.Share, Dir: dir, Blksize: opts.Blksize, Inline: opts.Inline,
		NoPassthrough: opts.NoPassthrough, WaitSeconds: opts.Wait}
	if err := g.call(ctx, api.MethodMount, p, &res, nil); err != nil {
		return err
	}
	if g.JSON {
		return writeJSON(out, res)
	}
	if !g.Quiet {
		fmt.Fprintf(out, "mounted %s:%s at %s\n", res.Peer, res.Share, res.Dir)
	}
	return nil
}

func newUnmountCommand(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:     "unmount MOUNTPOINT",
		Aliases: []string{"umount"},
		Short:   "Unmount a peer's share",
		Long: `Unmount a mount made with "peerfs mount". Data written through it has already reached
the peer (close-to-open consistency). "fusermount3 -u MOUNTPOINT" works too.`,
		Args: argsRange(1, 1),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			dir, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			if err := g.call(ctx, api.MethodUnmount, api.UnmountParams{Dir: dir}, nil, nil); err != nil {
				return err
			}
			if g.JSON {
				return writeJSON(g.Stdout, map[string]string{"dir": dir})
			}
			return nil
		}),
	}
}

func newMountsCommand(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "mounts",
		Short: "List the daemon's mounts",
		Args:  argsRange(0, 0),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			var res api.MountsResult
			if err := g.call(ctx, api.MethodMounts, nil, &res, nil); err != nil {
				return err
			}
			if g.JSON {
				return writeJSON(g.Stdout, res)
			}
			tw := tabwriter.NewWriter(g.Stdout, 0, 0, 2, ' ', 0)
			for _, m := range res.Mounts {
				fmt.Fprintf(tw, "%s:%s\t%s\tsince %s\n", m.Peer, m.Share, m.Dir, m.Since.Format("2006-01-02 15:04:05"))
			}
			return tw.Flush()
		}),
	}
}

func newStatsCommand(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stats MOUNTPOINT",
		Short: "Show per-operation counters of a mount",
		Long: `Per FUSE operation: calls, bytes, smallest, average and largest request; then cache
hits and misses and round trips to the peer. Use it to see how programs drive the mount
(for example how large cp's writes are).`,
		Args: argsRange(1, 1),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			dir, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			var res api.StatsResult
			if err := g.call(ctx, api.MethodStats, api.UnmountParams{Dir: dir}, &res, nil); err != nil {
				return err
			}
			if g.JSON {
				return writeJSON(g.Stdout, res)
			}
			tw := tabwriter.NewWriter(g.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "op\tcalls\tbytes\tmin\tavg\tmax\t")
			for _, o := range res.Ops {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", o.Name, o.Calls, humanBytes(o.Bytes),
					humanBytes(o.Min), humanBytes(int64(o.Avg)), humanBytes(o.Max))
			}
			tw.Flush()
			for _, k := range []string{"cache_hits", "cache_misses", "round_trips", "passthrough_opens"} {
				fmt.Fprintf(g.Stdout, "%-18s %d\n", k, res.Counters[k])
			}
			return nil
		}),
	}
}
