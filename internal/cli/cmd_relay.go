package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/time/rate"

	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/metrics"
	"github.com/peerfs/peerfs/internal/relay"
)

// RelayServeOptions are the flags of "peerfs relay serve".
type RelayServeOptions struct {
	Listen        string
	Advertise     string
	Token         string
	TokenFile     string
	URLToken      bool
	Metrics       string
	MetricsPublic bool
	MaxSessions   int
	MaxPerIP      int
	SessionRate   int64 // bytes/s, 0 unlimited
	GlobalRate    int64
}

func newRelayCommand(g *Globals) *cobra.Command {
	cmd := groupCommand(g, "relay", "Use relays to reach peers, or run one")
	cmd.Long = `Devices that cannot dial each other (both behind home routers, an office firewall) meet
at a relay both use, which copies their encrypted bytes; a direct path replaces the relayed
one whenever the network allows. "relay add", "ls" and "rm" choose the relays this device
uses; "relay serve" runs one (docs/RELAY.md).`
	cmd.AddCommand(newRelayAddCommand(g), newRelayLsCommand(g), newRelayRmCommand(g), newRelayServeCommand(g))
	return cmd
}

func newRelayServeCommand(g *Globals) *cobra.Command {
	var opts RelayServeOptions
	cmd := &cobra.Command{
		Use:   "serve [--listen HOST:PORT] [--token T]",
		Short: "Run a relay",
		Long: `Run a relay: devices that cannot dial each other meet there and the relay copies
their bytes. It sees only ciphertext: the two devices run their own TLS, pinned to each
other's device ID, inside the relayed stream, and it learns no device ID.

The relay has an identity of its own, never the device's, in the "relay" directory of the
config directory under --home (created on first start; keep it, or the URL changes). The first line on stdout is the relay's URL, which devices need: it pins the
relay's ID. With --json the first line is {"url": "..."}.

A private relay takes an access token (--token, --token-file, or $PEERFS_RELAY_TOKEN):
joins without it are refused. The token is a secret, so the printed URL leaves it out
unless --url-token; devices add "&token=TOKEN" to the URL.

See docs/RELAY.md for running one as a service.`,
		Example: `  peerfs relay serve --home /var/lib/peerfs-relay --listen :443 --advertise relay.example.org
  peerfs relay serve --listen 127.0.0.1:7450 --metrics 127.0.0.1:9450 --json`,
		Args: argsRange(0, 0),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runRelayServe(ctx, opts, g, args, g.Stdout)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&opts.Listen, "listen", ":"+relay.DefaultPort, "accept devices on `HOST:PORT`")
	f.StringVar(&opts.Advertise, "advertise", "", "`HOST[:PORT]` devices reach the relay at, for the printed URL (default: the listen address, or this host's name)")
	f.StringVar(&opts.Token, "token", "", "access `TOKEN` every device must present (env PEERFS_RELAY_TOKEN; visible to other local users in the process list: prefer --token-file)")
	f.StringVar(&opts.TokenFile, "token-file", "", "read the access token from `FILE`")
	f.BoolVar(&opts.URLToken, "url-token", false, "put the token in the printed URL (stdout may end up in logs)")
	f.StringVar(&opts.Metrics, "metrics", "", "serve Prometheus metrics on `ADDR` (loopback unless --metrics-public)")
	f.BoolVar(&opts.MetricsPublic, "metrics-public", false, "allow a --metrics address other machines can reach")
	f.IntVar(&opts.MaxSessions, "max-sessions", relay.DefaultMaxSessions, "most sessions at once")
	f.IntVar(&opts.MaxPerIP, "max-per-ip", relay.DefaultMaxConnsPerIP, "most connections from one address")
	f.Int64Var(&opts.SessionRate, "session-rate", 0, "most bytes per second of one session (0: unlimited)")
	f.Int64Var(&opts.GlobalRate, "global-rate", 0, "most bytes per second of all sessions together (0: unlimited)")
	return cmd
}

func runRelayServe(ctx context.Context, opts RelayServeOptions, g *Globals, args []string, out io.Writer) error {
	p, err := g.paths()
	if err != nil {
		return err
	}
	token, err := relayToken(opts)
	if err != nil {
		return err
	}
	if opts.SessionRate < 0 || opts.GlobalRate < 0 {
		return usageErrorf("--session-rate and --global-rate take bytes per second, 0 or more")
	}
	dir := relayIdentityDir(p)
	id, err := identity.Load(dir)
	if errors.Is(err, identity.ErrNoIdentity) {
		if id, err = identity.Generate(); err == nil {
			err = id.Save(dir)
		}
		if err == nil {
			g.notef("created the relay's identity in %s", dir)
		}
	}
	if err != nil {
		return err
	}
	host, err := advertised(opts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("relay: listening on %s: %w (is the port taken? ports below 1024 need root or CAP_NET_BIND_SERVICE)", opts.Listen, err)
	}
	if _, port, _ := net.SplitHostPort(host); port == "0" {
		_, lport, _ := net.SplitHostPort(ln.Addr().String())
		h, _, _ := net.SplitHostPort(host)
		host = net.JoinHostPort(h, lport)
	}
	log := g.logger(g.Stderr)
	srv, err := relay.New(relay.Config{
		Identity: id, Token: token, MaxSessions: opts.MaxSessions, MaxConnsPerIP: opts.MaxPerIP,
		SessionRate: rate.Limit(opts.SessionRate), GlobalRate: rate.Limit(opts.GlobalRate), Log: log,
	})
	if err != nil {
		ln.Close()
		return err
	}
	var mln net.Listener
	if opts.Metrics != "" {
		if mln, err = metrics.Listen(opts.Metrics, opts.MetricsPublic); err != nil {
			ln.Close()
			return err
		}
		mux := http.NewServeMux()
		mux.Handle(metrics.Path, srv.MetricsHandler())
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go hs.Serve(mln)
		defer hs.Close()
	}

	u := relay.URL{Host: host, ID: id.ID}
	if opts.URLToken {
		u.Token = token
	}
	if g.JSON {
		err = writeJSONLine(out, struct {
			URL string `json:"url"`
		}{u.String()})
	} else {
		_, err = fmt.Fprintln(out, u)
	}
	if err != nil {
		ln.Close()
		return err
	}
	log.Info("relay: serving", "listen", ln.Addr().String(), "metrics", opts.Metrics, "private", token != "")

	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err = <-done:
		srv.Close()
		return err
	case <-ctx.Done():
	}
	srv.Close()
	<-done
	return nil
}

// writeJSONLine writes v as one compact JSON line, so a script can read the first line.
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // a URL's "&" stays readable
	return enc.Encode(v)
}

// relayIdentityDir is where the relay keeps its identity: a directory of its own under the
// config directory, so a relay started in a device's home never shows the device's key (and
// ID) to every device that uses the relay.
func relayIdentityDir(p config.Paths) string { return filepath.Join(p.IdentityDir(), "relay") }

// relayToken is the access token from --token, --token-file or $PEERFS_RELAY_TOKEN.
func relayToken(opts RelayServeOptions) (string, error) {
	tok := opts.Token
	if opts.TokenFile != "" {
		if tok != "" {
			return "", usageErrorf("give the token with --token or --token-file, not both")
		}
		b, err := os.ReadFile(opts.TokenFile)
		if err != nil {
			return "", fmt.Errorf("reading the relay token: %w", err)
		}
		tok = strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("the token file %s is empty: put the token in it, or drop --token-file for a public relay", opts.TokenFile)
		}
	}
	if tok == "" {
		tok = os.Getenv("PEERFS_RELAY_TOKEN")
	}
	if len(tok) > relay.MaxTokenLen {
		return "", usageErrorf("the relay token is %d bytes; at most %d", len(tok), relay.MaxTokenLen)
	}
	return tok, nil
}

// advertised is the host:port for the printed URL.
func advertised(opts RelayServeOptions) (string, error) {
	_, lport, err := net.SplitHostPort(opts.Listen)
	if err != nil {
		return "", usageErrorf("--listen %q: want HOST:PORT, such as :443: %v", opts.Listen, err)
	}
	a := opts.Advertise
	if a == "" {
		lhost, _, _ := net.SplitHostPort(opts.Listen)
		if ip := net.ParseIP(lhost); lhost != "" && (ip == nil || !ip.IsUnspecified()) {
			return opts.Listen, nil
		}
		name, err := os.Hostname()
		if err != nil || name == "" {
			return "", usageErrorf("cannot tell which address devices reach this relay at: give it with --advertise HOST")
		}
		return net.JoinHostPort(name, lport), nil
	}
	if _, _, err := net.SplitHostPort(a); err != nil {
		return net.JoinHostPort(a, lport), nil
	}
	return a, nil
}
