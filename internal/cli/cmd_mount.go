package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/daemon"
)

// MountOptions are the flags of "peerfs mount".
type MountOptions struct {
	Blksize       int
	Inline        int
	NoPassthrough bool
	Idmap         string
	AllowOther    bool
	Wait          int
	Foreground    bool
	Writes        string

	Readahead       int64
	KernelReadahead int64
	ReadsInFlight   int
	WritesInFlight  int
	Piece           int
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
"fusermount3 -u". The daemon remembers the mount and mounts it again when it restarts,
until it is unmounted.

With --foreground this process serves the mount itself, without a daemon, like sshfs: it
dials the peer (at its address, where LAN discovery hears it, or through a relay you both
use; it cannot be dialled itself), logs to stderr and
serves until SIGINT or SIGTERM (then it unmounts and exits 0) or until the mount is
unmounted from outside. It listens for no peer, keeps its own cache per mount point, and
may run beside the daemon of the same home. It is not remembered.`,
		Example: `  peerfs mount desktop:projects ~/peers/desktop
  peerfs mount --blksize 262144 desktop:projects /mnt/p
  peerfs mount --foreground desktop:projects ~/peers/desktop`,
		Args: argsRange(2, 2),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runMount(ctx, opts, g, args, g.Stdout)
		}),
	}
	f := cmd.Flags()
	f.IntVar(&opts.Blksize, "blksize", 0, "st_blksize and statfs block size to report, in bytes (default 1 MiB)")
	f.IntVar(&opts.Inline, "inline", 0, "inline the content of files up to this size in directory listings, at most 65536 (default 65536)")
	f.BoolVar(&opts.NoPassthrough, "no-passthrough", false, "never serve cached files by FUSE passthrough")
	f.StringVar(&opts.Idmap, "idmap", "user", "how owners show: user (the peer's files show as yours, like sshfs -o idmap=user) or none (user and group IDs as the peer numbers them)")
	f.BoolVar(&opts.AllowOther, "allow-other", false, "let every user of this machine use the mount, with permissions checked as on a local disk (needs user_allow_other in /etc/fuse.conf unless root)")
	f.IntVar(&opts.Wait, "wait", 0, "seconds a change waits for a lost link before failing with EIO (default 30; reads fail within 1.5 s while the peer is offline)")
	f.StringVar(&opts.Writes, "writes", "sync", "when a change through the mount returns: sync (once the peer applied it; close-to-open across devices) or journal (once it is in the mount's journal on this disk: no round trip waited for, the peer gets changes in order, fsync waits for them, and the mount works offline)")
	f.BoolVarP(&opts.Foreground, "foreground", "f", false, "serve the mount from this process, without a daemon, until interrupted")
	f.Int64Var(&opts.Readahead, "readahead", 0, "bytes a sequential reader's stream runs ahead of it (default 16 MiB)")
	f.Int64Var(&opts.KernelReadahead, "kernel-readahead", 0, "the kernel's readahead window on the mount, in bytes; needs root (default 1 MiB)")
	f.IntVar(&opts.ReadsInFlight, "reads-in-flight", 0, "READ requests in flight for random reads (default 32)")
	f.IntVar(&opts.WritesInFlight, "writes-in-flight", 0, "WRITE requests in flight when written data is sent (default 16)")
	f.IntVar(&opts.Piece, "piece", 0, "bytes per READ and WRITE request, at most 1 MiB; READs round it up to a multiple of 256 KiB (default 1 MiB)")
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
	p := api.MountParams{Peer: r.Peer, Share: r.Share, Dir: dir, Blksize: opts.Blksize, Inline: opts.Inline,
		NoPassthrough: opts.NoPassthrough, WaitSeconds: opts.Wait, Idmap: opts.Idmap, AllowOther: opts.AllowOther,
		Readahead: opts.Readahead, KernelReadahead: opts.KernelReadahead, ReadsInFlight: opts.ReadsInFlight,
		WritesInFlight: opts.WritesInFlight, Piece: opts.Piece, Writes: opts.Writes}
	if p.Writes != api.WritesSync && p.Writes != api.WritesJournal {
		return usageErrorf("--writes %q: use sync (a change returns once the peer applied it) or journal (once it is in the mount's journal on this disk)", p.Writes)
	}
	if p.Piece < 0 || p.Piece > 1<<20 || p.Readahead < 0 || p.KernelReadahead < 0 || p.ReadsInFlight < 0 || p.WritesInFlight < 0 {
		return usageErrorf("--piece must be at most 1048576, and the tuning flags must not be negative")
	}
	if p.Idmap != "user" && p.Idmap != "none" {
		return usageErrorf("--idmap %q: use user (the peer's files show as yours) or none (IDs as the peer numbers them)", p.Idmap)
	}
	if opts.Foreground {
		return runForegroundMount(ctx, g, p, out)
	}
	var res api.MountInfo
	if err := g.call(ctx, api.MethodMount, p, &res, nil); err != nil {
		return err
	}
	return printMounted(g, out, &res)
}

func printMounted(g *Globals, out io.Writer, res *api.MountInfo) error {
	if g.JSON {
		return writeJSON(out, res)
	}
	if !g.Quiet {
		fmt.Fprintf(out, "mounted %s:%s at %s\n", res.Peer, res.Share, res.Dir)
	}
	return nil
}

// runForegroundMount serves the mount from this process until ctx is done (SIGINT,
// SIGTERM) or the mount is unmounted from outside; logs go to stderr.
func runForegroundMount(ctx context.Context, g *Globals, p api.MountParams, out io.Writer) error {
	paths, err := g.paths()
	if err != nil {
		return err
	}
	var printErr error
	mounted := func(info *api.MountInfo) {
		printErr = printMounted(g, out, info)
		g.notef("serving in the foreground: Ctrl-C, \"peerfs unmount %s\" or \"fusermount3 -u %s\" stops it", info.Dir, info.Dir)
	}
	err = daemon.Mount(ctx, daemon.MountOptions{Paths: paths, Mount: p, Logger: g.logger(g.Stderr), Mounted: mounted})
	if err != nil {
		return err
	}
	return printErr
}

// callMount makes a call about the mount at dir: to the daemon if it serves a mount there,
// else to the foreground mount serving it, if any.
func (g *Globals) callMount(ctx context.Context, method, dir string, result any) error {
	err := g.call(ctx, method, api.UnmountParams{Dir: dir}, result, nil)
	if err == nil || !errors.Is(err, api.ErrNoDaemon) && api.CodeOf(err) != api.CodeNotFound {
		return err
	}
	paths, perr := g.paths()
	if perr != nil {
		return err
	}
	c, ferr := api.Dial(paths.MountSocket(dir))
	if ferr != nil {
		return err // no foreground mount there: the daemon's answer says what to do
	}
	defer c.Close()
	return c.Call(ctx, method, api.UnmountParams{Dir: dir}, result, nil)
}

func newUnmountCommand(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:     "unmount MOUNTPOINT",
		Aliases: []string{"umount"},
		Short:   "Unmount a peer's share",
		Long: `Unmount a mount made with "peerfs mount". Data written through it has already reached
the peer (close-to-open consistency). "fusermount3 -u MOUNTPOINT" works too. The daemon
forgets the mount: it is not mounted again when the daemon restarts. A remembered mount the
daemon could not restore is forgotten the same way. A foreground mount stops and exits 0.`,
		Args: argsRange(1, 1),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			dir, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			if err := g.callMount(ctx, api.MethodUnmount, dir, nil); err != nil {
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
		Short: "List the mounts of the daemon and of foreground mounts",
		Long: `List the daemon's mounts, then those served by "peerfs mount --foreground" processes
of this home (marked foreground). Remembered mounts the daemon has not mounted again yet
(their peer is away) are not listed; the daemon's log names them.`,
		Args: argsRange(0, 0),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			res, err := g.listMounts(ctx)
			if err != nil {
				return err
			}
			if g.JSON {
				return writeJSON(g.Stdout, res)
			}
			tw := tabwriter.NewWriter(g.Stdout, 0, 0, 2, ' ', 0)
			for _, m := range res.Mounts {
				fg := ""
				if m.Foreground {
					fg = "\tforeground"
				}
				fmt.Fprintf(tw, "%s:%s\t%s\tsince %s%s\n", m.Peer, m.Share, m.Dir, m.Since.Format("2006-01-02 15:04:05"), fg)
				if j := m.Journal; j != nil {
					fmt.Fprintf(tw, "  journal\t%s\n", journalLine(j))
					for _, r := range j.Refusals {
						fmt.Fprintf(tw, "  refused\t%s %s %s: %s\n", r.Time.Format("15:04:05"), r.Op, r.Path, r.Error)
					}
				}
			}
			return tw.Flush()
		}),
	}
}

// journalLine says in a line what a journaling mount has waiting for its peer.
func journalLine(j *api.JournalInfo) string {
	state := "online"
	if !j.Online {
		state = "offline"
	}
	line := fmt.Sprintf("%s, %d changes waiting (%s)", state, j.Waiting, humanBytes(j.WaitingBytes))
	if !j.Oldest.IsZero() {
		line += fmt.Sprintf(", oldest %s ago", time.Since(j.Oldest).Round(time.Second))
	}
	if j.Refused > 0 {
		line += fmt.Sprintf(", %d refused by the peer", j.Refused)
	}
	if j.LastError != "" {
		line += ", last error: " + j.LastError
	}
	return line
}

// mountsDoc is the JSON document of "peerfs mounts": the API's MountsResult, with
// foreground set on mounts served by "peerfs mount --foreground".
type mountsDoc struct {
	Mounts []mountEntry `json:"mounts"`
}

type mountEntry struct {
	api.MountInfo
	Foreground bool `json:"foreground"`
}

// listMounts asks the daemon and every foreground mount's socket. Without a daemon and
// without foreground mounts it fails as any daemon command does.
func (g *Globals) listMounts(ctx context.Context) (*mountsDoc, error) {
	doc := &mountsDoc{Mounts: []mountEntry{}}
	var res api.MountsResult
	daemonErr := g.call(ctx, api.MethodMounts, nil, &res, nil)
	if daemonErr != nil && !errors.Is(daemonErr, api.ErrNoDaemon) {
		return nil, daemonErr
	}
	for _, m := range res.Mounts {
		doc.Mounts = append(doc.Mounts, mountEntry{MountInfo: m})
	}
	p, err := g.paths()
	if err != nil {
		return nil, err
	}
	socks, _ := filepath.Glob(filepath.Join(p.Runtime, "mount-*.sock"))
	found := false
	for _, sock := range socks {
		c, err := api.Dial(sock)
		if err != nil {
			continue // left by a foreground mount that was killed
		}
		var fres api.MountsResult
		err = c.Call(ctx, api.MethodMounts, nil, &fres, nil)
		c.Close()
		if err != nil {
			continue
		}
		found = true
		for _, m := range fres.Mounts {
			doc.Mounts = append(doc.Mounts, mountEntry{MountInfo: m, Foreground: true})
		}
	}
	if daemonErr != nil && !found {
		return nil, daemonErr
	}
	return doc, nil
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
			if err := g.callMount(ctx, api.MethodStats, dir, &res); err != nil {
				return err
			}
			if g.JSON {
				return writeJSON(g.Stdout, res)
			}
			tw := tabwriter.NewWriter(g.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "op\tcalls\tbytes\tmin\tavg\tmax\ttime\t")
			for _, o := range res.Ops {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", o.Name, o.Calls, humanBytes(o.Bytes),
					humanBytes(o.Min), humanBytes(int64(o.Avg)), humanBytes(o.Max),
					time.Duration(o.TotalMs*float64(time.Millisecond)).Round(time.Microsecond))
			}
			tw.Flush()
			for _, k := range []string{"cache_hits", "cache_misses", "round_trips", "passthrough_opens", "page_drops", "local_creates", "journaled_changes"} {
				fmt.Fprintf(g.Stdout, "%-18s %d\n", k, res.Counters[k])
			}
			return nil
		}),
	}
}
