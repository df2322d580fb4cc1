package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newGenManCommand is the hidden "peerfs gen-man DIR" that scripts/dist.sh runs to write the
// man pages shipped in the packages, one per command, from the same text as --help.
func newGenManCommand(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:    "gen-man DIR",
		Short:  "Write the man pages of every command into DIR (for packaging)",
		Hidden: true,
		Args:   argsRange(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g.ran = true
			return runGenMan(cmd.Context(), cmd.Root(), args[0])
		},
	}
}

// runGenMan writes peerfs.1, peerfs-init.1, ... into dir. The pages are dated by
// $SOURCE_DATE_EPOCH when set (reproducible packages), else today.
func runGenMan(ctx context.Context, root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var noTag func(*cobra.Command)
	noTag = func(c *cobra.Command) {
		c.DisableAutoGenTag = true
		for _, sub := range c.Commands() {
			noTag(sub)
		}
	}
	noTag(root)
	header := &doc.GenManHeader{
		Section: "1",
		Source:  "peerfs " + currentVersion().Version,
		Manual:  "peerfs manual",
	}
	if err := doc.GenManTree(root, header, dir); err != nil {
		return fmt.Errorf("writing man pages to %s: %w", dir, err)
	}
	return nil
}
