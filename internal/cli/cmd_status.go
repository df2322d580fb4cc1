package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/peerfs/peerfs/internal/api"
)

// StatusOptions are the flags of "peerfs status" (none yet).
type StatusOptions struct{}

func newStatusCommand(g *Globals) *cobra.Command {
	var opts StatusOptions
	return &cobra.Command{
		Use:   "status",
		Short: "Show the daemon's device, peers, links and transfers",
		Long: `Show what the running daemon sees: this device's ID, name and listen address, then
for each trusted peer whether it is connected (or why the last attempt failed), its
address, round-trip time, the negotiated TLS version, cipher suite, key exchange and
protocol version, the bytes moved each way, and the transfers in progress; then for each
mount with --writes journal whether its peer is reachable and what waits for it.`,
		Example: `  peerfs status
  peerfs status --json`,
		Args: argsRange(0, 0),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runStatus(ctx, opts, g, args, g.Stdout)
		}),
	}
}

func runStatus(ctx context.Context, opts StatusOptions, g *Globals, args []string, out io.Writer) error {
	var st api.StatusResult
	if err := g.call(ctx, api.MethodStatus, nil, &st, nil); err != nil {
		return err
	}
	if g.JSON {
		if st.Peers == nil {
			st.Peers = []api.PeerStatus{}
		}
		return writeJSON(out, st)
	}
	if _, err := io.WriteString(out, formatStatus(&st, time.Now())); err != nil {
		return err
	}
	// Journaling mounts: what waits for each peer ("peerfs mounts" lists every mount).
	var ms api.MountsResult
	if err := g.call(ctx, api.MethodMounts, nil, &ms, nil); err == nil {
		for _, m := range ms.Mounts {
			if m.Journal != nil {
				fmt.Fprintf(out, "\nmount %s  %s:%s\n  %-10s %s\n", m.Dir, m.Peer, m.Share, "journal", journalLine(m.Journal))
			}
		}
	}
	return nil
}

// formatStatus renders a status for people.
func formatStatus(st *api.StatusResult, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "device  %s (%s)\n", st.DeviceID, displayName(st.Name))
	fmt.Fprintf(&b, "listen  %s\n", st.Listen)
	for _, r := range st.Relays {
		state := "not connected"
		if r.Connected {
			state = "connected"
			if r.Transport != "" && r.Transport != "tls" {
				state += " over " + r.Transport
			}
			if r.Observed != "" {
				state += ", seen as " + r.Observed
			}
		}
		if !r.Connected && r.LastError != "" {
			state += ": " + r.LastError
		}
		fmt.Fprintf(&b, "relay   %s  %s\n", r.URL, state)
	}
	if len(st.Peers) == 0 {
		b.WriteString("\nno peers: add one with \"peerfs peer add ID --name NAME\"\n")
		return b.String()
	}
	for _, p := range st.Peers {
		b.WriteByte('\n')
		fmt.Fprintf(&b, "peer %s  %s  ", p.Name, p.DeviceID.Short())
		if p.Connected {
			b.WriteString("connected")
			if !p.Since.IsZero() {
				fmt.Fprintf(&b, " for %s", now.Sub(p.Since).Truncate(time.Second))
			}
		} else {
			b.WriteString("not connected")
		}
		b.WriteByte('\n')
		row := func(k, format string, args ...any) {
			fmt.Fprintf(&b, "  %-10s %s\n", k, fmt.Sprintf(format, args...))
		}
		if !p.Connected && p.LastError != "" && !slices.ContainsFunc(p.Candidates, func(c api.CandidateStatus) bool { return c.Error != "" }) {
			row("error", "%s", p.LastError) // the candidates' rows say it otherwise
		}
		if p.Addr != "" {
			row("address", "%s", p.Addr)
		} else {
			row("address", "- (waits for the peer to connect)")
		}
		if p.Connected && p.Path != "" {
			switch {
			case p.Via != "":
				row("path", "%s via %s (relay at %s)", p.Path, p.Via, p.RemoteAddr)
			case p.RemoteAddr != "":
				row("path", "%s, %s", p.Path, p.RemoteAddr)
			default:
				row("path", "%s", p.Path)
			}
		}
		if !p.Connected {
			for _, c := range p.Candidates {
				switch {
				case c.Error != "":
					row("tried", "%s (%s): %s", c.Addr, c.Source, c.Error)
				case c.Tried.IsZero():
					row("candidate", "%s (%s), not tried yet", c.Addr, c.Source)
				}
			}
		}
		if p.Connected {
			if p.RTTMicros > 0 {
				row("rtt", "%.2f ms", float64(p.RTTMicros)/1000)
			}
			if p.TLS != "" || p.Cipher != "" || p.KeyExch != "" {
				row("tls", "%s", strings.Join(nonEmpty(p.TLS, p.Cipher, p.KeyExch), ", "))
			}
			if p.Protocol > 0 {
				row("protocol", "%d", p.Protocol)
			}
			row("rekeys", "%d", p.Rekeys)
		}
		row("traffic", "in %s, out %s", humanBytes(int64(p.BytesIn)), humanBytes(int64(p.BytesOut)))
		for _, t := range p.Transfers {
			row("transfer", "%s %s -> %s: %s of %s, %d of %d files, started %s ago",
				t.Kind, displayName(t.Remote), displayName(t.Local), humanBytes(t.Bytes), humanBytes(t.Total),
				t.FilesDone, t.Files, now.Sub(t.Started).Truncate(time.Second))
		}
	}
	return b.String()
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
