// Package cli is the peerfs command line: cobra commands, one file per verb, each with an
// options struct and a runX function that does the work and that tests call directly. It is
// the only package that prints. Commands stay thin: they parse arguments, edit the config
// through config or ask the daemon through api, and print the answer as text or JSON. Data
// goes to stdout; progress, warnings and errors to stderr. Exit codes come from one function,
// classify, and are tabled in docs/CLI.md.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// Main runs the command line args (without the program name) and returns the exit status.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, restore the default action, so a second Ctrl-C kills at once.
	context.AfterFunc(ctx, stop)

	return execute(ctx, args, os.Stdout, os.Stderr, term.IsTerminal(int(os.Stderr.Fd())))
}

// execute runs args with the given streams; stderrTTY says whether progress bars may be drawn.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer, stderrTTY bool) int {
	g := &Globals{Stdout: stdout, Stderr: stderr, StderrTTY: stderrTTY}
	root := newRootCommand(g)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err != nil && !g.ran {
		// Cobra failed before a command ran: flags, arguments or an unknown command.
		var ue *usageError
		if !errors.As(err, &ue) {
			err = usageErrorf("%v: see \"peerfs --help\"", err)
		}
	}
	if err != nil && err == ctx.Err() {
		err = &interruptedError{"interrupted"}
	}
	g.printError(err)
	return ExitCode(err)
}

// Globals are the flags every command takes, and the streams it writes to.
type Globals struct {
	Home    string
	JSON    bool
	Quiet   bool
	Verbose bool

	Stdout    io.Writer
	Stderr    io.Writer
	StderrTTY bool // stderr is a terminal: progress bars allowed

	ran bool // a command's run function was entered
}

// printError reports err on stderr: "peerfs: message", and with --json also an error object.
func (g *Globals) printError(err error) {
	if err == nil {
		return
	}
	code, exit := classify(err)
	fmt.Fprintf(g.Stderr, "peerfs: %s\n", err)
	if !g.JSON {
		return
	}
	obj := struct {
		Type  string `json:"type"`
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		ExitCode int `json:"exit_code"`
	}{Type: "error", ExitCode: exit}
	obj.Error.Code = code
	obj.Error.Message = err.Error()
	b, _ := json.Marshal(obj)
	fmt.Fprintf(g.Stderr, "%s\n", b)
}

// warnf prints a warning on stderr; warnings are shown even with --quiet.
func (g *Globals) warnf(format string, args ...any) {
	fmt.Fprintf(g.Stderr, "peerfs: warning: "+format+"\n", args...)
}

// notef prints a hint for people on stderr, unless --quiet or --json.
func (g *Globals) notef(format string, args ...any) {
	if g.Quiet || g.JSON {
		return
	}
	fmt.Fprintf(g.Stderr, format+"\n", args...)
}

// writeJSON writes v as one JSON document on w.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding JSON output: %w", err)
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

func newRootCommand(g *Globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "peerfs",
		Short: "Share folders between your devices, end to end encrypted, peer to peer",
		Long: `peerfs shares folders between your devices, end to end encrypted, peer to peer.

Each device runs "peerfs daemon". Devices trust each other by device ID only: pair two
with a short code ("peerfs pair" on one, "peerfs pair CODE" on the other), or run
"peerfs id" on one, "peerfs peer add ID --name NAME" on the other, and the other way
round. Then export folders with "peerfs share add" and copy with "peerfs pull" and
"peerfs send".

Directories follow XDG ($XDG_CONFIG_HOME/peerfs, ...), or live under --home DIR
($PEERFS_HOME) when set. Flags win over environment variables, which win over the
config file.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noSubcommand,
	}
	var showVersion bool
	root.Flags().BoolVar(&showVersion, "version", false, "print the version and exit (as \"peerfs version\")")
	root.RunE = runE(g, func(ctx context.Context, args []string) error {
		if showVersion {
			return runVersion(ctx, VersionOptions{}, g, args, g.Stdout)
		}
		return root.Help()
	})
	// cobra's "completion bash|zsh|fish|powershell" prints a script that asks the binary
	// itself for completions (its hidden "__complete" command); the packages install them.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageErrorf("%v: see \"%s --help\"", err, cmd.CommandPath())
	})

	pf := root.PersistentFlags()
	pf.StringVar(&g.Home, "home", "", "keep config, data, cache and socket under `DIR` (env PEERFS_HOME)")
	pf.BoolVar(&g.JSON, "json", false, "print machine-readable JSON on stdout")
	pf.BoolVarP(&g.Quiet, "quiet", "q", false, "print only data and errors")
	pf.BoolVarP(&g.Verbose, "verbose", "v", false, "print more (daemon: debug logs)")

	defaultHelp := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		defaultHelp(cmd, args)
		if !cmd.HasAvailableSubCommands() && cmd != root {
			fmt.Fprint(cmd.OutOrStdout(), exitStatusHelp)
		}
	})

	root.AddCommand(
		newInitCommand(g),
		newIDCommand(g),
		newDaemonCommand(g),
		newPeerCommand(g),
		newPairCommand(g),
		newShareCommand(g),
		newLsCommand(g),
		newPullCommand(g),
		newSendCommand(g),
		newStatusCommand(g),
		newMountCommand(g),
		newUnmountCommand(g),
		newMountsCommand(g),
		newStatsCommand(g),
		newVersionCommand(g),
		newGenManCommand(g),
		newRelayCommand(g),
	)
	return root
}

// noSubcommand rejects arguments to a command that only groups subcommands.
func noSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unknown command %q for %q: see \"%s --help\"", args[0], cmd.CommandPath(), cmd.CommandPath())
	}
	return nil
}

// groupCommand builds a command that holds subcommands and runs none itself.
func groupCommand(g *Globals, use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  noSubcommand,
		RunE:  func(cmd *cobra.Command, args []string) error { g.ran = true; return cmd.Help() },
	}
}

// runE wraps a command's work: it marks that a command ran (so its errors are not usage
// errors) and passes the command's context.
func runE(g *Globals, fn func(ctx context.Context, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		g.ran = true
		return fn(cmd.Context(), args)
	}
}

// argsRange checks the number of positional arguments.
func argsRange(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usageErrorf("%q takes %s, got %d: usage: %s", cmd.CommandPath(), countArgs(lo, hi), len(args), cmd.UseLine())
		}
		return nil
	}
}

func countArgs(lo, hi int) string {
	switch {
	case lo == hi && lo == 0:
		return "no arguments"
	case lo == hi && lo == 1:
		return "1 argument"
	case lo == hi:
		return fmt.Sprintf("%d arguments", lo)
	}
	return fmt.Sprintf("%d to %d arguments", lo, hi)
}

// paths resolves the directories for --home (or $PEERFS_HOME, or XDG).
func (g *Globals) paths() (config.Paths, error) {
	return config.ResolvePaths(g.Home)
}

// reloadDaemon asks a running daemon to reread the config file after an edit. No daemon is
// fine: it reads the file when it starts. It reports whether a daemon took the change.
func (g *Globals) reloadDaemon(ctx context.Context, p config.Paths) bool {
	c, err := api.Dial(p.Socket())
	if errors.Is(err, api.ErrNoDaemon) {
		return false
	}
	if err == nil {
		defer c.Close()
		err = c.Call(ctx, api.MethodReload, nil, nil, nil)
	}
	if err != nil {
		g.warnf("the config is saved, but the daemon did not reload it: %v; restart the daemon or send it SIGHUP", err)
		return false
	}
	return true
}

// daemonStatus is the running daemon's status, for a listing that adds what only the daemon
// knows (what, in the warning) to what the config file says: nil when no daemon runs, or,
// with a warning, when it did not answer.
func (g *Globals) daemonStatus(ctx context.Context, what string) *api.StatusResult {
	var st api.StatusResult
	err := g.call(ctx, api.MethodStatus, nil, &st, nil)
	if err == nil {
		return &st
	}
	if !errors.Is(err, api.ErrNoDaemon) {
		g.warnf("cannot get %s from the daemon: %v", what, err)
	}
	return nil
}

// call dials the daemon for this home and runs one call.
func (g *Globals) call(ctx context.Context, method string, params, result any, onEvent func(api.Event)) error {
	p, err := g.paths()
	if err != nil {
		return err
	}
	c, err := api.Dial(p.Socket())
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Call(ctx, method, params, result, onEvent)
}
