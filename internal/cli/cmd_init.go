package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
)

// InitOptions are the flags of "peerfs init".
type InitOptions struct {
	Name string
}

func newInitCommand(g *Globals) *cobra.Command {
	var opts InitOptions
	cmd := &cobra.Command{
		Use:   "init [--name NAME]",
		Short: "Create this device's identity and config",
		Long: `Create this device's identity (an Ed25519 key and certificate) and an empty config
file, and print the new device ID. Give the ID to the devices you want to share with;
they add it with "peerfs peer add".

The identity is created once: init refuses to replace it, because a new key is a new
device ID that no peer trusts. Use --home DIR to run a second device on one machine.`,
		Example: `  peerfs init --name laptop`,
		Args:    argsRange(0, 0),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runInit(ctx, opts, g, args, g.Stdout)
		}),
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "this device's `NAME`, shown to you (default: the host name)")
	return cmd
}

func runInit(ctx context.Context, opts InitOptions, g *Globals, args []string, out io.Writer) error {
	p, err := g.paths()
	if err != nil {
		return err
	}
	name := opts.Name
	if name == "" {
		if name, err = os.Hostname(); err != nil || name == "" {
			name = "peerfs"
		}
	}

	if existing, err := identity.Load(p.IdentityDir()); err == nil {
		return fmt.Errorf("already initialised: this home has device %s (in %s): use another --home for a second device: %w",
			existing.ID, p.IdentityDir(), identity.ErrExists)
	}
	id, err := identity.Generate()
	if err != nil {
		return err
	}
	if err := id.Save(p.IdentityDir()); err != nil {
		if errors.Is(err, identity.ErrExists) {
			return fmt.Errorf("already initialised: %w", err)
		}
		return err
	}
	// A config file left from an earlier identity is kept: its peers and shares are still
	// the user's choices.
	if err := config.Create(p, &config.File{Name: name}); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}

	if g.JSON {
		return writeJSON(out, struct {
			DeviceID  identity.DeviceID `json:"device_id"`
			Name      string            `json:"name"`
			ConfigDir string            `json:"config_dir"`
		}{id.ID, name, p.Config})
	}
	if _, err := fmt.Fprintln(out, id.ID); err != nil {
		return err
	}
	g.notef("Created device %q in %s. Its ID is above: peers add it with\n  peerfs peer add %s --name %s", name, p.Config, id.ID, name)
	return nil
}
