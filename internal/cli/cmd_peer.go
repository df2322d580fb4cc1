package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
)

func newPeerCommand(g *Globals) *cobra.Command {
	cmd := groupCommand(g, "peer", "Add, list and remove trusted peers")
	cmd.Long = `Manage the devices this device trusts. A peer is a device ID with a name you choose;
the name is how you refer to it in PEER:SHARE/PATH. Trust must go both ways: each
device adds the other.`
	cmd.AddCommand(newPeerAddCommand(g), newPeerSetCommand(g), newPeerLsCommand(g), newPeerRmCommand(g))
	return cmd
}

// peerJSON is a peer in JSON output.
type peerJSON struct {
	Name      string            `json:"name"`
	DeviceID  identity.DeviceID `json:"device_id"`
	Addr      string            `json:"addr"`
	Connected *bool             `json:"connected,omitempty"`  // absent when the daemon is not running
	LastError string            `json:"last_error,omitempty"` //
}

// PeerAddOptions are the flags of "peerfs peer add".
type PeerAddOptions struct {
	Name string
	Addr string
}

func newPeerAddCommand(g *Globals) *cobra.Command {
	var opts PeerAddOptions
	cmd := &cobra.Command{
		Use:   "add ID --name NAME [--addr HOST:PORT]",
		Short: "Trust a device",
		Long: `Trust the device with device ID ID under the name NAME (lower-case letters, digits,
'.', '_' and '-'). With --addr the daemon dials the peer there; without, it meets the
peer through the relays both use ("peerfs relay add"), or waits for the peer to dial in. A
running daemon picks up the change at once.`,
		Example: `  peerfs peer add MFZWI3D-BONSGYC-YLTMRWG-C43ENR5-QXGZDMM-FZWI3DP-BONSGYY-LTMRWAD --name desktop --addr desktop.lan:7462`,
		Args:    argsRange(1, 1),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runPeerAdd(ctx, opts, g, args, g.Stdout)
		}),
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "the peer's `NAME` (required)")
	cmd.Flags().StringVar(&opts.Addr, "addr", "", "dial the peer at `HOST:PORT`")
	return cmd
}

func runPeerAdd(ctx context.Context, opts PeerAddOptions, g *Globals, args []string, out io.Writer) error {
	id, err := identity.ParseDeviceID(args[0])
	if err != nil {
		return usageErrorf("%v", err) // says what to do
	}
	if opts.Name == "" {
		return usageErrorf("a peer needs a name: add --name NAME")
	}
	if err := config.CheckPeerName(opts.Name); err != nil {
		return usageErrorf("--name: %s", stripInvalid(err))
	}
	if opts.Addr != "" {
		if err := config.CheckAddr(opts.Addr); err != nil {
			return usageErrorf("--addr %q: %v", opts.Addr, err)
		}
	}
	p, err := g.paths()
	if err != nil {
		return err
	}
	if self, err := identity.Load(p.IdentityDir()); err == nil && self.ID == id {
		return usageErrorf("%s is this device's own ID: add the ID that \"peerfs id\" prints on the other device", id)
	}

	peer := config.Peer{Name: opts.Name, ID: id, Addr: opts.Addr}
	err = config.Update(p, func(f *config.File) error {
		if old := f.PeerByName(peer.Name); old != nil {
			return api.Errorf(api.CodeInvalid, "a peer named %q already exists (device %s): choose another --name, or first run \"peerfs peer rm %s\"", peer.Name, old.ID.Short(), peer.Name)
		}
		if old := f.PeerByID(peer.ID); old != nil {
			return api.Errorf(api.CodeInvalid, "device %s is already trusted as %q: run \"peerfs peer rm %s\" first to rename it", peer.ID.Short(), old.Name, old.Name)
		}
		f.Peers = append(f.Peers, peer)
		return nil
	})
	if err != nil {
		return err
	}
	reloaded := g.reloadDaemon(ctx, p)

	if g.JSON {
		return writeJSON(out, struct {
			Peer           peerJSON `json:"peer"`
			DaemonReloaded bool     `json:"daemon_reloaded"`
		}{peerJSON{Name: peer.Name, DeviceID: peer.ID, Addr: peer.Addr}, reloaded})
	}
	if !g.Quiet {
		_, err = fmt.Fprintf(out, "added peer %s (%s)\n", peer.Name, peer.ID.Short())
	}
	return err
}

// PeerSetOptions are the flags of "peerfs peer set".
type PeerSetOptions struct {
	Addr string
}

func newPeerSetCommand(g *Globals) *cobra.Command {
	var opts PeerSetOptions
	cmd := &cobra.Command{
		Use:   "set NAME --addr HOST:PORT",
		Short: "Change a peer's address",
		Long: `Change the address the daemon dials to reach the peer NAME; --addr "" removes it, so
the daemon waits for the peer to dial in. Its shares and mounts are kept. A running daemon
redials at once.`,
		Example: `  peerfs peer set desktop --addr 192.168.1.20:7462`,
		Args:    argsRange(1, 1),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runPeerSet(ctx, opts, g, args, g.Stdout)
		}),
	}
	cmd.Flags().StringVar(&opts.Addr, "addr", "", "dial the peer at `HOST:PORT` (\"\": wait for it to dial in)")
	cmd.MarkFlagRequired("addr")
	return cmd
}

func runPeerSet(ctx context.Context, opts PeerSetOptions, g *Globals, args []string, out io.Writer) error {
	name := args[0]
	if opts.Addr != "" {
		if err := config.CheckAddr(opts.Addr); err != nil {
			return usageErrorf("--addr %q: %v", opts.Addr, err)
		}
	}
	p, err := g.paths()
	if err != nil {
		return err
	}
	var peer config.Peer
	err = config.Update(p, func(f *config.File) error {
		cp := f.PeerByName(name)
		if cp == nil {
			return api.Errorf(api.CodeUnknownPeer, "no peer named %q: \"peerfs peer ls\" lists them", name)
		}
		cp.Addr = opts.Addr
		peer = *cp
		return nil
	})
	if err != nil {
		return err
	}
	reloaded := g.reloadDaemon(ctx, p)
	if g.JSON {
		return writeJSON(out, struct {
			Peer           peerJSON `json:"peer"`
			DaemonReloaded bool     `json:"daemon_reloaded"`
		}{peerJSON{Name: peer.Name, DeviceID: peer.ID, Addr: peer.Addr}, reloaded})
	}
	if g.Quiet {
		return nil
	}
	if peer.Addr == "" {
		_, err = fmt.Fprintf(out, "peer %s has no address now: the daemon meets it through relays or waits for it to dial in\n", peer.Name)
	} else {
		_, err = fmt.Fprintf(out, "peer %s is now dialled at %s\n", peer.Name, peer.Addr)
	}
	return err
}

// PeerLsOptions are the flags of "peerfs peer ls" (none yet).
type PeerLsOptions struct{}

func newPeerLsCommand(g *Globals) *cobra.Command {
	var opts PeerLsOptions
	return &cobra.Command{
		Use:   "ls",
		Short: "List trusted peers",
		Long: `List the trusted peers: name, device ID, address, and whether the daemon is connected
to each (shown as "-" when the daemon is not running).`,
		Example: `  peerfs peer ls
  peerfs peer ls --json`,
		Args: argsRange(0, 0),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runPeerLs(ctx, opts, g, args, g.Stdout)
		}),
	}
}

func runPeerLs(ctx context.Context, opts PeerLsOptions, g *Globals, args []string, out io.Writer) error {
	p, err := g.paths()
	if err != nil {
		return err
	}
	f, err := config.Load(p)
	if err != nil {
		return err
	}

	// Connection state is the daemon's to know; without a daemon, the list still shows.
	status := g.daemonStatus(ctx, "connection status")

	peers := make([]peerJSON, 0, len(f.Peers))
	for _, cp := range f.Peers {
		pj := peerJSON{Name: cp.Name, DeviceID: cp.ID, Addr: cp.Addr}
		if status != nil {
			connected := false
			if i := slices.IndexFunc(status.Peers, func(ps api.PeerStatus) bool { return ps.DeviceID == cp.ID }); i >= 0 {
				connected = status.Peers[i].Connected
				pj.LastError = status.Peers[i].LastError
			}
			pj.Connected = &connected
		}
		peers = append(peers, pj)
	}

	if g.JSON {
		return writeJSON(out, struct {
			Peers         []peerJSON `json:"peers"`
			DaemonRunning bool       `json:"daemon_running"`
		}{peers, status != nil})
	}
	if len(peers) == 0 {
		g.notef("no peers yet: add one with \"peerfs peer add ID --name NAME\"")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDEVICE ID\tADDRESS\tSTATUS")
	for _, pj := range peers {
		addr := pj.Addr
		if addr == "" {
			addr = "-"
		}
		state := "-"
		if pj.Connected != nil {
			state = "not connected"
			if *pj.Connected {
				state = "connected"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", pj.Name, pj.DeviceID, addr, state)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if status == nil {
		g.notef("(the daemon is not running, so connection status is unknown)")
	}
	return nil
}

// PeerRmOptions are the flags of "peerfs peer rm" (none yet).
type PeerRmOptions struct{}

func newPeerRmCommand(g *Globals) *cobra.Command {
	var opts PeerRmOptions
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Stop trusting a peer",
		Long: `Remove the peer NAME: it is no longer trusted, and it is removed from every share that
named it. A running daemon drops its connection at once.`,
		Example: `  peerfs peer rm desktop`,
		Args:    argsRange(1, 1),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runPeerRm(ctx, opts, g, args, g.Stdout)
		}),
	}
}

func runPeerRm(ctx context.Context, opts PeerRmOptions, g *Globals, args []string, out io.Writer) error {
	name := args[0]
	p, err := g.paths()
	if err != nil {
		return err
	}
	var removed config.Peer
	sharesUpdated := []string{}
	err = config.Update(p, func(f *config.File) error {
		i := slices.IndexFunc(f.Peers, func(cp config.Peer) bool { return cp.Name == name })
		if i < 0 {
			return api.Errorf(api.CodeUnknownPeer, "no peer named %q: \"peerfs peer ls\" lists them", name)
		}
		removed = f.Peers[i]
		f.Peers = slices.Delete(f.Peers, i, i+1)
		for si := range f.Shares {
			s := &f.Shares[si]
			if j := slices.Index(s.Peers, name); j >= 0 {
				s.Peers = slices.Delete(s.Peers, j, j+1)
				sharesUpdated = append(sharesUpdated, s.Name)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	reloaded := g.reloadDaemon(ctx, p)

	if g.JSON {
		return writeJSON(out, struct {
			Removed        peerJSON `json:"removed"`
			SharesUpdated  []string `json:"shares_updated"`
			DaemonReloaded bool     `json:"daemon_reloaded"`
		}{peerJSON{Name: removed.Name, DeviceID: removed.ID, Addr: removed.Addr}, sharesUpdated, reloaded})
	}
	if g.Quiet {
		return nil
	}
	if _, err := fmt.Fprintf(out, "removed peer %s (%s)\n", removed.Name, removed.ID.Short()); err != nil {
		return err
	}
	for _, s := range sharesUpdated {
		fmt.Fprintf(out, "removed %s from share %s\n", removed.Name, s)
	}
	return nil
}
