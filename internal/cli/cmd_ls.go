package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/peerfs/peerfs/internal/api"
)

// LsOptions are the flags of "peerfs ls" (none yet).
type LsOptions struct{}

func newLsCommand(g *Globals) *cobra.Command {
	var opts LsOptions
	return &cobra.Command{
		Use:   "ls PEER[:SHARE[/PATH]]",
		Short: "List a peer's shares, or a directory of a share",
		Long: `With PEER or PEER:, list the shares PEER exports to this device. With PEER:SHARE/PATH,
list that directory (or file) like "ls -l": mode, links, owner and group as numbers (they
are the peer's), size, modification time, name. The daemon must be running.`,
		Example: `  peerfs ls desktop
  peerfs ls desktop:projects
  peerfs ls desktop:projects/src/main.go`,
		Args: argsRange(1, 1),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runLs(ctx, opts, g, args, g.Stdout)
		}),
	}
}

func runLs(ctx context.Context, opts LsOptions, g *Globals, args []string, out io.Writer) error {
	r, err := ParseRemote(args[0], false)
	if err != nil {
		return err
	}
	var res api.ListResult
	if err := g.call(ctx, api.MethodList, api.ListParams{Peer: r.Peer, Share: r.Share, Path: r.Path}, &res, nil); err != nil {
		return err
	}
	if g.JSON {
		if res.Shares == nil && r.Share == "" {
			res.Shares = []api.ShareInfo{}
		}
		return writeJSON(out, res)
	}
	if r.Share == "" {
		if len(res.Shares) == 0 {
			g.notef("%s exports no shares to this device", r.Peer)
			return nil
		}
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		for _, s := range res.Shares {
			access := "read-write"
			if s.ReadOnly {
				access = "read-only"
			}
			fmt.Fprintf(tw, "%s:%s\t%s\n", r.Peer, displayName(s.Name), access)
		}
		return tw.Flush()
	}
	return writeLong(out, res.Entries, time.Now())
}
