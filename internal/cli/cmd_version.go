package cli

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// The version, commit and build date are set at link time by "make build" and
// scripts/dist.sh:
//
//	-X github.com/peerfs/peerfs/internal/cli.version=$(git describe --tags --always --dirty)
//	-X github.com/peerfs/peerfs/internal/cli.commit=$(git rev-parse HEAD)
//	-X github.com/peerfs/peerfs/internal/cli.buildDate=2026-01-02T15:04:05Z
//
// A plain "go build" or "go install ...@latest" sets none of them; currentVersion then falls
// back to what the Go toolchain recorded in the binary.
var (
	version   string
	commit    string
	buildDate string
)

// VersionInfo is what "peerfs version" prints. Empty fields are unknown.
type VersionInfo struct {
	Version   string `json:"version"`    // git describe, a module version, or "devel"
	Commit    string `json:"commit"`     // the full commit hash (12 digits from a pseudo-version)
	BuildDate string `json:"build_date"` // RFC 3339, UTC
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"` // GOOS/GOARCH
}

// currentVersion describes this binary.
func currentVersion() VersionInfo {
	bi, _ := debug.ReadBuildInfo()
	return resolveVersion(VersionInfo{Version: version, Commit: commit, BuildDate: buildDate}, bi)
}

// pseudoVersionRev matches the commit at the end of a Go pseudo-version
// (v0.0.0-20260102150405-0123456789ab, v1.2.4-0.20260102150405-0123456789ab, ...).
var pseudoVersionRev = regexp.MustCompile(`[-.][0-9]{14}-([0-9a-f]{12})(\+incompatible)?$`)

// resolveVersion completes what the linker set (linked) from the build information the Go
// toolchain records. "go build" in a git checkout records vcs.revision and vcs.modified,
// unless -buildvcs=false (CI sets it); "go install MODULE@VERSION" records no VCS settings
// but the module's version, from which a pseudo-version's commit can be read.
func resolveVersion(linked VersionInfo, bi *debug.BuildInfo) VersionInfo {
	v := linked
	v.GoVersion = runtime.Version()
	v.Platform = runtime.GOOS + "/" + runtime.GOARCH
	if bi == nil {
		if v.Version == "" {
			v.Version = "devel"
		}
		return v
	}
	var revision string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if v.Commit == "" {
		v.Commit = revision
	}
	if v.Version == "" {
		switch mv := bi.Main.Version; {
		case mv != "" && mv != "(devel)":
			v.Version = mv
			if m := pseudoVersionRev.FindStringSubmatch(mv); m != nil && v.Commit == "" {
				v.Commit = m[1]
			}
		case modified:
			v.Version = "devel-dirty"
		default:
			v.Version = "devel"
		}
	}
	return v
}

// VersionOptions are the flags of "peerfs version" (none yet).
type VersionOptions struct{}

func newVersionCommand(g *Globals) *cobra.Command {
	var opts VersionOptions
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date, Go version and platform",
		Long: `Print the version of this peerfs binary (from "git describe" at build time, the module
version for "go install ...@VERSION", or "devel"), the commit it was built from, the build
date, the Go version and the platform. "peerfs --version" is the same. With --quiet, only
the version.`,
		Example: `  peerfs version
  peerfs --version --json`,
		Args: argsRange(0, 0),
		RunE: runE(g, func(ctx context.Context, args []string) error {
			return runVersion(ctx, opts, g, args, g.Stdout)
		}),
	}
}

func runVersion(ctx context.Context, opts VersionOptions, g *Globals, args []string, out io.Writer) error {
	v := currentVersion()
	if g.JSON {
		return writeJSON(out, v)
	}
	if g.Quiet {
		_, err := fmt.Fprintln(out, v.Version)
		return err
	}
	_, err := io.WriteString(out, formatVersion(v))
	return err
}

// formatVersion renders v for people, one "label value" line per field.
func formatVersion(v VersionInfo) string {
	unknown := func(s string) string {
		if s == "" {
			return "unknown"
		}
		return s
	}
	return fmt.Sprintf("peerfs    %s\ncommit    %s\nbuilt     %s\ngo        %s\nplatform  %s\n",
		unknown(v.Version), unknown(v.Commit), unknown(v.BuildDate), unknown(v.GoVersion), unknown(v.Platform))
}
