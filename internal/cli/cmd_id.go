package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
)

// IDOptions are the flags of "peerfs id" (none yet).
type IDOptions struct{}

func newIDCommand(g *Globals) *cobra.Command {
	var opts IDOptions
	return &cobra.Command{
		Use:   "id",
		Short: "Print this device's ID",
		Long: `Print this device's ID, the name other devices trust it by. Read it out or paste it
to the other device, which adds it with "peerfs peer add ID --name NAME".`,
		Example: `  peerfs id
  peerfs id --json`,
		Args: argsRange(0, 0),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runID(ctx, opts, g, args, g.Stdout)
		}),
	}
}

func runID(ctx context.Context, opts IDOptions, g *Globals, args []string, out io.Writer) error {
	p, err := g.paths()
	if err != nil {
		return err
	}
	id, err := identity.Load(p.IdentityDir())
	if err != nil {
		return err
	}
	name := ""
	if f, err := config.Load(p); err == nil {
		name = f.Name
	} else if !errors.Is(err, config.ErrNotInitialized) {
		return err
	}
	if g.JSON {
		return writeJSON(out, struct {
			DeviceID identity.DeviceID `json:"device_id"`
			Name     string            `json:"name"`
		}{id.ID, name})
	}
	_, err = fmt.Fprintln(out, id.ID)
	return err
}
