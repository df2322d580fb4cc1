package cli

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// setLinked sets the link-time version variables for one test, as -ldflags -X would.
func setLinked(t *testing.T, v, c, d string) {
	t.Helper()
	oldV, oldC, oldD := version, commit, buildDate
	version, commit, buildDate = v, c, d
	t.Cleanup(func() { version, commit, buildDate = oldV, oldC, oldD })
}

func TestVersionOutput(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	setLinked(t, "v1.2.3-4-g0123456-dirty", rev, "2026-01-02T15:04:05Z")
	home := t.TempDir()
	platform := runtime.GOOS + "/" + runtime.GOARCH

	want := "peerfs    v1.2.3-4-g0123456-dirty\n" +
		"commit    " + rev + "\n" +
		"built     2026-01-02T15:04:05Z\n" +
		"go        " + runtime.Version() + "\n" +
		"platform  " + platform + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if out := mustRun(t, home, args...); out != want {
			t.Errorf("peerfs %s:\n%s\nwant:\n%s", strings.Join(args, " "), out, want)
		}
	}
	if out := mustRun(t, home, "version", "--quiet"); out != "v1.2.3-4-g0123456-dirty\n" {
		t.Errorf("peerfs version --quiet = %q, want the version alone", out)
	}

	for _, args := range [][]string{{"version", "--json"}, {"--version", "--json"}} {
		var got VersionInfo
		decodeOne(t, mustRun(t, home, args...), &got)
		wantInfo := VersionInfo{Version: "v1.2.3-4-g0123456-dirty", Commit: rev,
			BuildDate: "2026-01-02T15:04:05Z", GoVersion: runtime.Version(), Platform: platform}
		if got != wantInfo {
			t.Errorf("peerfs %s = %+v, want %+v", strings.Join(args, " "), got, wantInfo)
		}
	}

	if exit, _, _ := run(t, home, "version", "extra"); exit != 2 {
		t.Errorf("peerfs version extra: exit %d, want 2", exit)
	}
}

func TestVersionUnknownFields(t *testing.T) {
	setLinked(t, "", "", "")
	out := formatVersion(resolveVersion(VersionInfo{}, nil))
	for _, want := range []string{"peerfs    devel\n", "commit    unknown\n", "built     unknown\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
}

// TestResolveVersion checks what a binary says when the linker set nothing or only part:
// go build in a checkout (VCS settings), go install MODULE@VERSION (a module version, maybe
// a pseudo-version), go build with -buildvcs=false (nothing).
func TestResolveVersion(t *testing.T) {
	const rev = "fedcba9876543210fedcba9876543210fedcba98"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-01-02T15:04:05Z"}, {Key: "vcs.modified", Value: modified}}
	}
	info := func(mainVersion string, settings []debug.BuildSetting) *debug.BuildInfo {
		bi := &debug.BuildInfo{Settings: settings}
		bi.Main.Path = "github.com/peerfs/peerfs"
		bi.Main.Version = mainVersion
		return bi
	}
	tests := []struct {
		name        string
		linked      VersionInfo
		bi          *debug.BuildInfo
		wantVersion string
		wantCommit  string
	}{
		{"linked wins", VersionInfo{Version: "v1.0.0", Commit: "abc"}, info("(devel)", vcs("false")), "v1.0.0", "abc"},
		{"linked version, commit from vcs", VersionInfo{Version: "v1.0.0"}, info("(devel)", vcs("false")), "v1.0.0", rev},
		{"go build in a checkout", VersionInfo{}, info("(devel)", vcs("false")), "devel", rev},
		{"go build in a modified checkout", VersionInfo{}, info("(devel)", vcs("true")), "devel-dirty", rev},
		{"go build -buildvcs=false", VersionInfo{}, info("(devel)", nil), "devel", ""},
		{"go install @v1.2.3", VersionInfo{}, info("v1.2.3", nil), "v1.2.3", ""},
		{"go install @latest, untagged", VersionInfo{}, info("v0.0.0-20260102150405-0123456789ab", nil),
			"v0.0.0-20260102150405-0123456789ab", "0123456789ab"},
		{"go install @latest, after a tag", VersionInfo{}, info("v1.2.4-0.20260102150405-0123456789ab", nil),
			"v1.2.4-0.20260102150405-0123456789ab", "0123456789ab"},
		{"go install of a pre-release pseudo-version", VersionInfo{}, info("v1.3.0-rc.1.0.20260102150405-0123456789ab", nil),
			"v1.3.0-rc.1.0.20260102150405-0123456789ab", "0123456789ab"},
		{"no build info", VersionInfo{}, nil, "devel", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolveVersion(tt.linked, tt.bi)
			if got.Version != tt.wantVersion || got.Commit != tt.wantCommit {
				t.Errorf("version %q commit %q, want %q %q", got.Version, got.Commit, tt.wantVersion, tt.wantCommit)
			}
			if got.GoVersion != runtime.Version() || got.Platform != runtime.GOOS+"/"+runtime.GOARCH {
				t.Errorf("go %q platform %q, want this binary's", got.GoVersion, got.Platform)
			}
		})
	}
}
