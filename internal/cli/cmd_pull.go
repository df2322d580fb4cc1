package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/peerfs/peerfs/internal/api"
)

// PullOptions are the flags of "peerfs pull" (none yet).
type PullOptions struct{}

func newPullCommand(g *Globals) *cobra.Command {
	var opts PullOptions
	return &cobra.Command{
		Use:   "pull PEER:SHARE[/PATH] [DEST]",
		Short: "Copy a file or folder from a peer",
		Long: `Copy a file or a whole tree from a peer's share to DEST (default: the current
directory). If DEST is an existing directory the copy lands inside it under the remote
name. Every file is verified by its content hash; an interrupted pull resumes where it
stopped when run again, and files already present with the same size and time are
skipped.

On a terminal a progress bar shows on stderr; otherwise a summary line is printed on
stdout at the end. With --json, stdout gets one JSON line per event and a last line of
type "done" (see docs/CLI.md).`,
		Example: `  peerfs pull desktop:projects/peerfs ~/src
  peerfs pull desktop:photos/2024 --json > pull.ndjson`,
		Args: argsRange(1, 2),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runPull(ctx, opts, g, args, g.Stdout)
		}),
	}
}

func runPull(ctx context.Context, opts PullOptions, g *Globals, args []string, out io.Writer) error {
	r, err := ParseRemote(args[0], true)
	if err != nil {
		return err
	}
	dest := "."
	if len(args) > 1 {
		dest = args[1]
	}
	dest, err = filepath.Abs(dest)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", dest, err)
	}
	params := api.PullParams{Peer: r.Peer, Share: r.Share, Path: r.Path, Dest: dest}
	return runTransfer(ctx, g, out, api.MethodPull, params, "pulling", "pulled", dest)
}

// runTransfer runs a pull or send through the daemon and shows it.
func runTransfer(ctx context.Context, g *Globals, out io.Writer, method string, params any, doing, done, target string) error {
	pr := newTransferPrinter(g, out, doing, done, target)
	var res api.TransferResult
	if err := g.call(ctx, method, params, &res, pr.Event); err != nil {
		pr.Abort()
		if ctx.Err() != nil {
			return &interruptedError{"interrupted: run the same command again to resume"}
		}
		return err
	}
	return pr.Done(&res)
}
