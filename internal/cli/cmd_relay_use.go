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
	"github.com/peerfs/peerfs/internal/relay"
)

// relayJSON is a configured relay in JSON output: the URL without its token, and the
// daemon's view of it when the daemon runs.
type relayJSON struct {
	URL       string `json:"url"`
	Token     bool   `json:"token"`               // the URL carries an access token
	Connected *bool  `json:"connected,omitempty"` // absent when the daemon is not running
	Transport string `json:"transport,omitempty"`
	Observed  string `json:"observed,omitempty"`
	Sessions  *int   `json:"sessions,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

func newRelayAddCommand(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "add URL",
		Short: "Use a relay to reach peers and be reached",
		Long: `Add the relay URL (peerfs-relay://HOST[:PORT]/?id=RELAYID[&token=TOKEN], as "peerfs relay
serve" prints it) to this device. The daemon keeps a connection waiting there, so that
trusted peers that cannot dial this device reach it through the relay, and reaches peers
through it when it cannot dial them; a direct path replaces the relayed one when one opens.
Both devices must use the same relay. The relay sees only ciphertext (docs/RELAY.md). A
running daemon picks up the change at once.`,
		Example: `  peerfs relay add 'peerfs-relay://relay.example.org:443/?id=W7QP34E-CINAPDV-4QHMGHN-SDFK6IR-E3UZDOG-FRGAMAB-4FIVER7-Y26JEAE'`,
		Args:    argsRange(1, 1),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runRelayAdd(ctx, g, args, g.Stdout)
		}),
	}
}

func runRelayAdd(ctx context.Context, g *Globals, args []string, out io.Writer) error {
	u, err := relay.ParseURL(args[0])
	if err != nil {
		return usageErrorf("%v", err) // says what is wrong
	}
	p, err := g.paths()
	if err != nil {
		return err
	}
	err = config.Update(p, func(f *config.File) error {
		if i := f.RelayIndex(u); i >= 0 {
			return api.Errorf(api.CodeInvalid, "relay %s is already added: to change its URL, first run \"peerfs relay rm %s\"", u.Redacted(), u.Host)
		}
		f.Relays = append(f.Relays, u.String())
		return nil
	})
	if err != nil {
		return err
	}
	reloaded := g.reloadDaemon(ctx, p)
	if g.JSON {
		return writeJSON(out, struct {
			Relay          relayJSON `json:"relay"`
			DaemonReloaded bool      `json:"daemon_reloaded"`
		}{relayJSON{URL: u.Redacted(), Token: u.Token != ""}, reloaded})
	}
	if !g.Quiet {
		_, err = fmt.Fprintf(out, "added relay %s\n", u.Redacted())
	}
	return err
}

func newRelayLsCommand(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the relays this device uses",
		Long: `List the relays this device uses (URLs without their token) and, when the daemon runs,
whether a connection waits there (so peers can reach this device through it), over which
transport (tls, or websocket where raw TLS is blocked), the address the relay last saw this
device at, the sessions peers opened through it, and the last error.`,
		Example: `  peerfs relay ls
  peerfs relay ls --json`,
		Args: argsRange(0, 0),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runRelayLs(ctx, g, args, g.Stdout)
		}),
	}
}

func runRelayLs(ctx context.Context, g *Globals, args []string, out io.Writer) error {
	p, err := g.paths()
	if err != nil {
		return err
	}
	f, err := config.Load(p)
	if err != nil {
		return err
	}
	status := g.daemonStatus(ctx, "the relays' state")
	relays := make([]relayJSON, 0, len(f.Relays))
	for _, u := range f.RelayURLs() {
		rj := relayJSON{URL: u.Redacted(), Token: u.Token != ""}
		if status != nil {
			connected, sessions := false, 0
			if i := slices.IndexFunc(status.Relays, func(rs api.RelayStatus) bool { return rs.URL == rj.URL }); i >= 0 {
				rs := status.Relays[i]
				connected, sessions = rs.Connected, rs.Sessions
				rj.Transport, rj.Observed, rj.LastError = rs.Transport, rs.Observed, rs.LastError
			}
			rj.Connected, rj.Sessions = &connected, &sessions
		}
		relays = append(relays, rj)
	}
	if g.JSON {
		return writeJSON(out, struct {
			Relays        []relayJSON `json:"relays"`
			DaemonRunning bool        `json:"daemon_running"`
		}{relays, status != nil})
	}
	if len(relays) == 0 {
		g.notef("no relays: add one with \"peerfs relay add URL\" (docs/RELAY.md)")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "URL\tSTATUS\tTRANSPORT\tSEEN AS\tSESSIONS\tERROR")
	for _, r := range relays {
		state, sessions := "-", "-"
		if r.Connected != nil {
			state = "not connected"
			if *r.Connected {
				state = "connected"
			}
			sessions = fmt.Sprint(*r.Sessions)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.URL, state, dash(r.Transport), dash(r.Observed), sessions, dash(r.LastError))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if status == nil {
		g.notef("(the daemon is not running, so the relays' state is unknown)")
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newRelayRmCommand(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm URL|HOST:PORT",
		Short: "Stop using a relay",
		Long: `Remove a relay from this device, named by its URL or its HOST:PORT as "peerfs relay ls"
shows it. A running daemon stops waiting there at once and dials no peer through it;
links already running through it go on until they end.`,
		Example: `  peerfs relay rm relay.example.org:443`,
		Args:    argsRange(1, 1),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runRelayRm(ctx, g, args, g.Stdout)
		}),
	}
}

func runRelayRm(ctx context.Context, g *Globals, args []string, out io.Writer) error {
	host := args[0]
	if u, err := relay.ParseURL(args[0]); err == nil {
		host = u.Host
	} else if config.CheckAddr(args[0]) != nil {
		return usageErrorf("%q is neither a relay URL nor HOST:PORT: give it as \"peerfs relay ls\" shows it", args[0])
	}
	p, err := g.paths()
	if err != nil {
		return err
	}
	var removed relay.URL
	err = config.Update(p, func(f *config.File) error {
		i := f.RelayIndex(relay.URL{Host: host})
		if i < 0 {
			return api.Errorf(api.CodeNotFound, "no relay at %s: \"peerfs relay ls\" lists them", host)
		}
		removed, _ = relay.ParseURL(f.Relays[i])
		f.Relays = slices.Delete(f.Relays, i, i+1)
		return nil
	})
	if err != nil {
		return err
	}
	reloaded := g.reloadDaemon(ctx, p)
	if g.JSON {
		return writeJSON(out, struct {
			Removed        relayJSON `json:"removed"`
			DaemonReloaded bool      `json:"daemon_reloaded"`
		}{relayJSON{URL: removed.Redacted(), Token: removed.Token != ""}, reloaded})
	}
	if !g.Quiet {
		_, err = fmt.Fprintf(out, "removed relay %s\n", removed.Redacted())
	}
	return err
}
