package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mdp/qrterminal/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
)

// PairOptions are the flags of "peerfs pair".
type PairOptions struct {
	Name    string
	Addr    string
	Timeout time.Duration
}

func newPairCommand(g *Globals) *cobra.Command {
	var opts PairOptions
	cmd := &cobra.Command{
		Use:   "pair [CODE] [--name NAME]",
		Short: "Pair with another device by a short code",
		Long: `Make two devices trust each other without typing a device ID. On one device run
"peerfs pair": it prints a code (a number and three words, also as a QR code) and waits up
to 5 minutes. On the other run "peerfs pair CODE". The two daemons check that both used the
same code, over the link between them, then each trusts the other by device ID under the
name the other chose (or --name), remembers where to reach it and connects.

A code works once: a wrong code ends the pairing on both devices; start again with a new
one. The daemon must be running on both devices. The device that types the code finds
the other on the local network by the code's number (LAN discovery), or at a relay both
use ("peerfs relay add"); elsewhere, or with discovery off and no common relay, give its
peer address with --addr (the "listen" of "peerfs status" there).`,
		Example: `  peerfs pair
  peerfs pair 42-apple-brave-cloud --name desktop
  peerfs pair 42-apple-brave-cloud --addr desktop.example.net:7462`,
		Args: argsRange(0, 1),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runPair(ctx, opts, g, args, g.Stdout)
		}),
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "trust the other device under `NAME` (default: the name it chose)")
	cmd.Flags().StringVar(&opts.Addr, "addr", "", "with CODE: the other device's peer address `HOST:PORT` (advanced)")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 0, "wait at most this long for the other device (at most and by default 5m)")
	return cmd
}

// pairDoneJSON is the last line of "peerfs pair --json".
type pairDoneJSON struct {
	Type     string `json:"type"` // "done"
	Name     string `json:"name"`
	DeviceID string `json:"device_id"`
	Addr     string `json:"addr,omitempty"`
}

func runPair(ctx context.Context, opts PairOptions, g *Globals, args []string, out io.Writer) error {
	params := api.PairParams{Name: opts.Name, Addr: opts.Addr}
	if len(args) == 1 {
		params.Code = args[0]
	} else if opts.Addr != "" {
		return usageErrorf("--addr goes with a code: on the device that shows the code, run \"peerfs pair\" alone")
	}
	if opts.Name != "" {
		if err := config.CheckPeerName(opts.Name); err != nil {
			return usageErrorf("--name: %s", stripInvalid(err))
		}
	}
	if opts.Addr != "" {
		if err := config.CheckAddr(opts.Addr); err != nil {
			return usageErrorf("--addr %q: %v", opts.Addr, err)
		}
	}
	if opts.Timeout < 0 {
		return usageErrorf("--timeout must be positive")
	}
	params.TimeoutSeconds = int((opts.Timeout + time.Second - 1) / time.Second)

	onEvent := func(e api.Event) {
		if e.Type != "start" || e.Code == "" {
			return
		}
		showCode(g, out, e)
	}
	var res api.PairResult
	if err := g.call(ctx, api.MethodPair, params, &res, onEvent); err != nil {
		return err
	}
	if g.JSON {
		return writeLine(out, pairDoneJSON{Type: "done", Name: res.Name, DeviceID: res.DeviceID.String(), Addr: res.Addr})
	}
	_, err := fmt.Fprintf(out, "paired with %s (%s)\n", res.Name, res.DeviceID)
	return err
}

// showCode prints the code to type on the other device: with --json as the first line
// {"code": ...}; else as text, and as a QR code when stdout is a terminal.
func showCode(g *Globals, out io.Writer, e api.Event) {
	if g.JSON {
		writeLine(out, struct {
			Code           string `json:"code"`
			ExpiresSeconds int    `json:"expires_seconds"`
		}{e.Code, e.ExpiresSeconds})
		return
	}
	fmt.Fprintf(out, "pairing code: %s\n", e.Code)
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) && !g.Quiet {
		qrterminal.GenerateHalfBlock(e.Code, qrterminal.L, out)
	}
	g.notef("on the other device run: peerfs pair %s\nwaiting up to %s...", e.Code, time.Duration(e.ExpiresSeconds)*time.Second)
}

// writeLine writes v as one line of compact JSON.
func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding JSON output: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
