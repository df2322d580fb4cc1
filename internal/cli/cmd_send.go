package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/peerfs/peerfs/internal/api"
)

// SendOptions are the flags of "peerfs send" (none yet).
type SendOptions struct{}

func newSendCommand(g *Globals) *cobra.Command {
	var opts SendOptions
	return &cobra.Command{
		Use:   "send PATH PEER:SHARE[/DIR]",
		Short: "Copy a file or folder to a peer",
		Long: `Copy the local file or tree PATH into DIR of a peer's share (default: the share's
root), under its own name. The share must be read-write for this device. Files are
verified by content hash on the peer; an interrupted send resumes when run again.

Progress and output work as for "peerfs pull".`,
		Example: `  peerfs send ./report.pdf desktop:projects/docs
  peerfs send ~/photos/2024 server:backup`,
		Args: argsRange(2, 2),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runSend(ctx, opts, g, args, g.Stdout)
		}),
	}
}

func runSend(ctx context.Context, opts SendOptions, g *Globals, args []string, out io.Writer) error {
	src, err := filepath.Abs(args[0])
	if err != nil {
		return fmt.Errorf("resolving %s: %w", args[0], err)
	}
	if _, err := os.Lstat(src); err != nil {
		return fmt.Errorf("cannot send %s: %w", src, err)
	}
	r, err := ParseRemote(args[1], true)
	if err != nil {
		return err
	}
	params := api.SendParams{Source: src, Peer: r.Peer, Share: r.Share, Dir: r.Path}
	return runTransfer(ctx, g, out, api.MethodSend, params, "sending", "sent", r.String())
}
