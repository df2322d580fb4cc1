package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
)

func newShareCommand(g *Globals) *cobra.Command {
	cmd := groupCommand(g, "share", "Export, list and remove this device's shares")
	cmd.Long = `Manage the folders this device exports. A share is a named folder, read-write or
read-only, that only the peers it names may use.`
	cmd.AddCommand(newShareAddCommand(g), newShareLsCommand(g), newShareRmCommand(g))
	return cmd
}

// shareJSON is a share in JSON output.
type shareJSON struct {
	Name           string   `json:"name"`
	Path           string   `json:"path"`
	ReadOnly       bool     `json:"read_only"`
	Privileged     bool     `json:"privileged"`
	Peers          []string `json:"peers"`
	AllowHardlinks bool     `json:"allow_hardlinks"`
}

func toShareJSON(s config.Share) shareJSON {
	peers := s.Peers
	if peers == nil {
		peers = []string{}
	}
	return shareJSON{Name: s.Name, Path: s.Path, ReadOnly: s.ReadOnly, Privileged: s.Privileged, Peers: peers, AllowHardlinks: s.AllowHardlinks}
}

// ShareAddOptions are the flags of "peerfs share add".
type ShareAddOptions struct {
	ReadOnly       bool
	Privileged     bool
	Peers          []string
	AllowHardlinks bool
}

func newShareAddCommand(g *Globals) *cobra.Command {
	var opts ShareAddOptions
	cmd := &cobra.Command{
		Use:   "add NAME PATH [--read-only] [--privileged] [--allow-hardlinks] [--peer NAME ...]",
		Short: "Export a folder",
		Long: `Export the existing directory PATH as share NAME (1-64 letters, digits, '-', '_' and
'.', not starting with '.'). Only the peers named with --peer may use it; repeat
--peer or separate names with commas. With --read-only peers can read but not write.
A file with more than one hard link is served only if the link was made through the
share, since its other names may lie outside it; --allow-hardlinks serves them all.
With --privileged its peers may also change owners and groups (chown), keep set-user-ID
and set-group-ID bits on files and make device nodes, as far as the daemon's account may
(as root: anything); without it those requests are refused with EPERM.
A running daemon picks up the change at once.`,
		Example: `  peerfs share add projects ~/projects --peer desktop
  peerfs share add photos /srv/photos --read-only --peer desktop,server`,
		Args: argsRange(2, 2),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runShareAdd(ctx, opts, g, args, g.Stdout)
		}),
	}
	cmd.Flags().BoolVar(&opts.ReadOnly, "read-only", false, "peers may read but not write")
	cmd.Flags().BoolVar(&opts.Privileged, "privileged", false, "peers may chown, set set-user-ID and set-group-ID bits on files and make device nodes, as far as the daemon's account may")
	cmd.Flags().StringSliceVar(&opts.Peers, "peer", nil, "allow the peer `NAME` (repeatable)")
	cmd.Flags().BoolVar(&opts.AllowHardlinks, "allow-hardlinks", false,
		"serve files with several hard links even if not linked through the share (their other names may lie outside it)")
	return cmd
}

func runShareAdd(ctx context.Context, opts ShareAddOptions, g *Globals, args []string, out io.Writer) error {
	name := args[0]
	if err := config.CheckShareName(name); err != nil {
		return usageErrorf("%s", stripInvalid(err))
	}
	dir, err := filepath.Abs(args[1])
	if err != nil {
		return fmt.Errorf("resolving %s: %w", args[1], err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cannot share %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return usageErrorf("cannot share %s: not a directory; a share is a folder", dir)
	}
	var peers []string
	for _, pn := range opts.Peers {
		pn = strings.TrimSpace(pn)
		if pn != "" && !slices.Contains(peers, pn) {
			peers = append(peers, pn)
		}
	}

	p, err := g.paths()
	if err != nil {
		return err
	}
	share := config.Share{Name: name, Path: dir, ReadOnly: opts.ReadOnly, Privileged: opts.Privileged, Peers: peers, AllowHardlinks: opts.AllowHardlinks}
	err = config.Update(p, func(f *config.File) error {
		if old := f.ShareByName(name); old != nil {
			return api.Errorf(api.CodeInvalid, "a share named %q already exists (%s): choose another name, or first run \"peerfs share rm %s\"", name, old.Path, name)
		}
		for _, pn := range peers {
			if f.PeerByName(pn) == nil {
				return api.Errorf(api.CodeUnknownPeer, "--peer %s: no such peer: add it first with \"peerfs peer add ID --name %s\"", pn, pn)
			}
		}
		f.Shares = append(f.Shares, share)
		return nil
	})
	if err != nil {
		return err
	}
	reloaded := g.reloadDaemon(ctx, p)

	if g.JSON {
		return writeJSON(out, struct {
			Share          shareJSON `json:"share"`
			DaemonReloaded bool      `json:"daemon_reloaded"`
		}{toShareJSON(share), reloaded})
	}
	if g.Quiet {
		return nil
	}
	if _, err := fmt.Fprintf(out, "added share %s (%s, %s)\n", share.Name, share.Path, shareAccess(share)); err != nil {
		return err
	}
	if len(peers) == 0 {
		g.notef("no peer may use it yet: remove it and add it again with --peer NAME")
	}
	return nil
}

func shareAccess(s config.Share) string {
	access := "read-write"
	switch {
	case s.ReadOnly:
		access = "read-only"
	case s.Privileged:
		access = "read-write,privileged"
	}
	if s.AllowHardlinks {
		access += ",hardlinks"
	}
	return access
}

// ShareLsOptions are the flags of "peerfs share ls" (none yet).
type ShareLsOptions struct{}

func newShareLsCommand(g *Globals) *cobra.Command {
	var opts ShareLsOptions
	return &cobra.Command{
		Use:     "ls",
		Short:   "List this device's shares",
		Long:    `List the folders this device exports: name, access, path and the peers allowed.`,
		Example: `  peerfs share ls`,
		Args:    argsRange(0, 0),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runShareLs(ctx, opts, g, args, g.Stdout)
		}),
	}
}

func runShareLs(ctx context.Context, opts ShareLsOptions, g *Globals, args []string, out io.Writer) error {
	p, err := g.paths()
	if err != nil {
		return err
	}
	f, err := config.Load(p)
	if err != nil {
		return err
	}
	if g.JSON {
		shares := make([]shareJSON, 0, len(f.Shares))
		for _, s := range f.Shares {
			shares = append(shares, toShareJSON(s))
		}
		return writeJSON(out, struct {
			Shares []shareJSON `json:"shares"`
		}{shares})
	}
	if len(f.Shares) == 0 {
		g.notef("no shares yet: export a folder with \"peerfs share add NAME PATH --peer PEER\"")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tACCESS\tPATH\tPEERS")
	for _, s := range f.Shares {
		peers := strings.Join(s.Peers, ",")
		if peers == "" {
			peers = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, shareAccess(s), s.Path, peers)
	}
	return tw.Flush()
}

// ShareRmOptions are the flags of "peerfs share rm" (none yet).
type ShareRmOptions struct{}

func newShareRmCommand(g *Globals) *cobra.Command {
	var opts ShareRmOptions
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Stop exporting a folder",
		Long: `Stop exporting share NAME. The folder itself is left untouched. A running daemon stops
serving it at once.`,
		Example: `  peerfs share rm projects`,
		Args:    argsRange(1, 1),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runShareRm(ctx, opts, g, args, g.Stdout)
		}),
	}
}

func runShareRm(ctx context.Context, opts ShareRmOptions, g *Globals, args []string, out io.Writer) error {
	name := args[0]
	p, err := g.paths()
	if err != nil {
		return err
	}
	var removed config.Share
	err = config.Update(p, func(f *config.File) error {
		i := slices.IndexFunc(f.Shares, func(s config.Share) bool { return s.Name == name })
		if i < 0 {
			return api.Errorf(api.CodeUnknownShare, "no share named %q: \"peerfs share ls\" lists them", name)
		}
		removed = f.Shares[i]
		f.Shares = slices.Delete(f.Shares, i, i+1)
		return nil
	})
	if err != nil {
		return err
	}
	reloaded := g.reloadDaemon(ctx, p)

	if g.JSON {
		return writeJSON(out, struct {
			Removed        shareJSON `json:"removed"`
			DaemonReloaded bool      `json:"daemon_reloaded"`
		}{toShareJSON(removed), reloaded})
	}
	if !g.Quiet {
		_, err = fmt.Fprintf(out, "removed share %s (%s is untouched)\n", removed.Name, removed.Path)
	}
	return err
}
